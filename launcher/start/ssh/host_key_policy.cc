#include "launcher/start/ssh/host_key_policy.h"

#include <string_view>

namespace dslaunch::launcher {
namespace {

// The -t argument of ssh-keyscan for a key type name: "ssh-ed25519" -> "ed25519",
// "ecdsa-sha2-nistp256" -> "ecdsa", "ssh-rsa" -> "rsa"; other names are passed unchanged.
std::string KeyscanType(std::string_view key_type) {
  if (key_type.starts_with("ecdsa")) return "ecdsa";
  if (key_type.starts_with("ssh-")) return std::string(key_type.substr(4));
  return std::string(key_type);
}

}  // namespace

HostKeyAction DecideHostKey(HostKeyState state, bool accept_new) {
  switch (state) {
    case HostKeyState::kKnown:
      return HostKeyAction::kAccept;
    case HostKeyState::kUnknown:
      return accept_new ? HostKeyAction::kAddAndAccept : HostKeyAction::kRefuse;
    case HostKeyState::kChanged:
    case HostKeyState::kOtherType:
      return HostKeyAction::kRefuse;
  }
  return HostKeyAction::kRefuse;
}

std::string KnownHostsName(const std::string& host, int port) {
  if (port == 22) return host;
  return "[" + host + "]:" + std::to_string(port);
}

std::string HostKeyRefusalMessage(const PresentedHostKey& key, HostKeyState state) {
  const std::string offered = key.key_type + " " + key.fingerprint;
  const std::string port_flag = key.port == 22 ? "" : " -p " + std::to_string(key.port);
  if (state == HostKeyState::kUnknown) {
    return "host key for " + key.host + " is not in known_hosts (" + key.known_hosts_path + "): it offers " +
           offered + "; if that is the host's key, accept it once with `ssh-keyscan" + port_flag + " -t " +
           KeyscanType(key.key_type) + " " + key.host + " >> " + key.known_hosts_path + "` or `ssh" + port_flag +
           " " + key.host + "`, or run with --ssh_accept_new_host_keys";
  }
  std::string what = state == HostKeyState::kChanged
                         ? "has CHANGED since it was recorded in known_hosts (" + key.known_hosts_path + ")"
                         : "does not match known_hosts (" + key.known_hosts_path +
                               ", which holds a key of another type for it)";
  return "host key for " + key.host + " " + what + ": it now offers " + offered +
         "; this can be an attack (or a reinstalled host); if the new key is right, remove the old one with "
         "`ssh-keygen -R " + KnownHostsName(key.host, key.port) + " -f " + key.known_hosts_path +
         "` and accept the new one (--ssh_accept_new_host_keys never replaces a changed key)";
}

}  // namespace dslaunch::launcher
