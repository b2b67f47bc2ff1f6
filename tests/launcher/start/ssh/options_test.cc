#include "launcher/start/ssh/options.h"

#include <doctest/doctest.h>

namespace dslaunch::launcher {
namespace {

TEST_CASE("SshLoginUser prefers the hostfile's user@, then --ssh_user, then the local user") {
  SshOptions o;
  o.local_user = "me";
  CHECK(SshLoginUser(o, "") == "me");
  o.user = "ops";
  CHECK(SshLoginUser(o, "") == "ops");
  CHECK(SshLoginUser(o, "alice") == "alice");
}

TEST_CASE("KnownHostsPath and IdentityCandidates default to the files under ~/.ssh") {
  SshOptions o;
  CHECK(KnownHostsPath(o).status().code() == StatusCode::kInvalidArgument);
  o.home = "/home/u";
  CHECK(*KnownHostsPath(o) == "/home/u/.ssh/known_hosts");
  auto defaults = IdentityCandidates(o);
  REQUIRE(defaults.size() == 3);
  CHECK(defaults[0].path == "/home/u/.ssh/id_ed25519");
  CHECK(defaults[1].path == "/home/u/.ssh/id_ecdsa");
  CHECK(defaults[2].path == "/home/u/.ssh/id_rsa");
  CHECK_FALSE(defaults[0].explicit_path);

  o.known_hosts = "/etc/kh";
  o.identities = {"/k1", "/k2"};
  CHECK(*KnownHostsPath(o) == "/etc/kh");
  auto given = IdentityCandidates(o);
  REQUIRE(given.size() == 2);
  CHECK(given[1].path == "/k2");
  CHECK(given[1].explicit_path);
  CHECK(IdentityCandidates(SshOptions{}).empty());
}

TEST_CASE("ValidateSshOptions rejects a bad port, a non-positive timeout, and no known_hosts") {
  SshOptions o;
  o.home = "/home/u";
  CHECK(ValidateSshOptions(o).ok());
  o.port = 0;
  CHECK(ValidateSshOptions(o).code() == StatusCode::kInvalidArgument);
  o.port = 65536;
  CHECK(ValidateSshOptions(o).code() == StatusCode::kInvalidArgument);
  o.port = 2222;
  o.connect_timeout = std::chrono::milliseconds(0);
  CHECK(ValidateSshOptions(o).code() == StatusCode::kInvalidArgument);
  o.connect_timeout = std::chrono::milliseconds(1);
  o.home.clear();
  CHECK(ValidateSshOptions(o).code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dslaunch::launcher
