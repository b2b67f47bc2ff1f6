#include "launcher/start/ssh/host_key_policy.h"

#include <doctest/doctest.h>

namespace dslaunch::launcher {
namespace {

bool Contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

TEST_CASE("DecideHostKey accepts known keys, adds unknown ones only with accept-new, never accepts a change") {
  CHECK(DecideHostKey(HostKeyState::kKnown, false) == HostKeyAction::kAccept);
  CHECK(DecideHostKey(HostKeyState::kKnown, true) == HostKeyAction::kAccept);
  CHECK(DecideHostKey(HostKeyState::kUnknown, false) == HostKeyAction::kRefuse);
  CHECK(DecideHostKey(HostKeyState::kUnknown, true) == HostKeyAction::kAddAndAccept);
  CHECK(DecideHostKey(HostKeyState::kChanged, false) == HostKeyAction::kRefuse);
  CHECK(DecideHostKey(HostKeyState::kChanged, true) == HostKeyAction::kRefuse);
  CHECK(DecideHostKey(HostKeyState::kOtherType, true) == HostKeyAction::kRefuse);
}

TEST_CASE("An unknown host key is refused with its type, fingerprint and the ways to accept it") {
  PresentedHostKey key{"10.0.0.3", 22, "ssh-ed25519", "SHA256:abcDEF", "/home/u/.ssh/known_hosts"};
  std::string m = HostKeyRefusalMessage(key, HostKeyState::kUnknown);
  CHECK(m.starts_with("host key for 10.0.0.3 is not in known_hosts (/home/u/.ssh/known_hosts)"));
  CHECK(Contains(m, "ssh-ed25519 SHA256:abcDEF"));
  CHECK(Contains(m, "`ssh-keyscan -t ed25519 10.0.0.3 >> /home/u/.ssh/known_hosts`"));
  CHECK(Contains(m, "`ssh 10.0.0.3`"));
  CHECK(Contains(m, "--ssh_accept_new_host_keys"));
}

TEST_CASE("A host key on another port names the port in the commands to accept it") {
  PresentedHostKey key{"node7", 2222, "ecdsa-sha2-nistp256", "SHA256:x", "/kh"};
  std::string m = HostKeyRefusalMessage(key, HostKeyState::kUnknown);
  CHECK(Contains(m, "`ssh-keyscan -p 2222 -t ecdsa node7 >> /kh`"));
  CHECK(Contains(m, "`ssh -p 2222 node7`"));
}

TEST_CASE("A changed host key is refused with a warning and the way to remove the old key") {
  PresentedHostKey key{"10.0.0.3", 2222, "ssh-rsa", "SHA256:new", "/kh"};
  std::string m = HostKeyRefusalMessage(key, HostKeyState::kChanged);
  CHECK(m.starts_with("host key for 10.0.0.3 has CHANGED"));
  CHECK(Contains(m, "ssh-rsa SHA256:new"));
  CHECK(Contains(m, "attack"));
  CHECK(Contains(m, "`ssh-keygen -R [10.0.0.3]:2222 -f /kh`"));
  CHECK(Contains(m, "never replaces a changed key"));
  std::string other = HostKeyRefusalMessage(key, HostKeyState::kOtherType);
  CHECK(Contains(other, "another type"));
  CHECK(Contains(other, "SHA256:new"));
}

TEST_CASE("KnownHostsName brackets hosts on ports other than 22") {
  CHECK(KnownHostsName("a", 22) == "a");
  CHECK(KnownHostsName("a", 2222) == "[a]:2222");
}

}  // namespace
}  // namespace dslaunch::launcher
