// Cluster tests: real sshd in network namespaces (scripts/netns-cluster.sh), the real dslaunch over
// libssh, agents on every namespaced host. Without a cluster (not root) every case is reported as
// skipped, or fails where the cluster is required (tests/support/skip.h).
#include <doctest/doctest.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include "common/exit_codes.h"
#include "tests/support/cluster.h"
#include "tests/support/skip.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kBin = DSLAUNCH_BIN_DIR;
const std::string kSource = DSLAUNCH_SOURCE_DIR;
const std::string kLauncher = kBin + "/dslaunch";
const std::string kEnvCheck = kBin + "/env_check";
constexpr int kNodes = 4;
constexpr int kSlots = 2;
constexpr std::chrono::seconds kRunTimeout{90};

bool Contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

// Whether Debian's Python has PyTorch (python3-torch, which scripts/setup.sh installs).
bool PythonHasTorch() {
  return RunProcess({"/usr/bin/python3", "-c", "import torch"}, std::chrono::seconds(60)).exit_code == 0;
}

std::vector<std::string> Launch(const Cluster& c, const TempDir& dir, std::vector<std::string> options,
                                std::vector<std::string> worker_args) {
  std::vector<std::string> argv = {kLauncher, "--hostfile", c.hostfile(), "--ssh_identity", c.dir() + "/id_ed25519",
                                   "--ssh_known_hosts", c.dir() + "/known_hosts", "--log_dir", dir.path() + "/logs",
                                   "--grace_period", "1"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"--no_python", kEnvCheck, "--pid_dir", dir.path()});
  argv.insert(argv.end(), worker_args.begin(), worker_args.end());
  return argv;
}

TEST_CASE("Four nodes with two slots each run the job with the environment contract on every rank") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  auto r = RunProcess(Launch(*c, dir, {}, {"--expect_world", "8", "--expect_local_world", "2", "--expect_nodes", "4"}),
                      kRunTimeout);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  for (int rank = 0; rank < kNodes * kSlots; ++rank) {
    CAPTURE(rank);
    CHECK(Contains(r.out, "[rank " + std::to_string(rank) + " " + c->Addr(rank / kSlots) + "] rank " +
                              std::to_string(rank) + " of 8: environment ok\n"));
  }
  CHECK(ReadPidFiles(dir.path()).size() == 8);
  CHECK(AllDead(ReadPidFiles(dir.path())));
}

TEST_CASE("A failure on node 3 stops the workers on every node and names the host") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  auto r = RunProcess(Launch(*c, dir, {}, {"--fail_rank", "7", "--exit_code", "5"}), kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 5);
  CHECK(Contains(r.err, "rank 7 on host " + c->Addr(3)));
  CHECK(Contains(r.err, "failing on purpose"));
  auto pids = ReadPidFiles(dir.path());
  CHECK(pids.size() == 8);
  CHECK(AllDead(pids));
}

TEST_CASE("Processes that workers moved into sessions of their own are stopped on every node") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  const std::string escape_dir = dir.path() + "/escape";
  std::filesystem::create_directory(escape_dir);
  auto r = RunProcess(Launch(*c, dir, {}, {"--escape_dir", escape_dir}), kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  // Each remote agent swept its node's two before it exited, and the launcher waits for the
  // agents' exits: nothing to wait for here.
  auto escapees = ReadPidFiles(escape_dir);
  CHECK(escapees.size() == 8);
  CHECK(AllDead(escapees));
}

TEST_CASE("SIGKILL of the launcher leaves no worker on any node once the agents notice") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  Subprocess launcher(Launch(*c, dir, {"--heartbeat_timeout", "2"}, {"--hang", "--ignore_sigterm"}));
  REQUIRE(WaitFor([&] { return ReadPidFiles(dir.path()).size() == 8; }, std::chrono::seconds(60)));
  auto pids = ReadPidFiles(dir.path());
  launcher.Signal(SIGKILL);
  launcher.Wait(kRunTimeout);
  // Agents notice the closed connection at once; grace period 1 s, then SIGKILL.
  CHECK(WaitFor([&] { return AllDead(pids); }, std::chrono::seconds(15)));
}

TEST_CASE("A node that loses its network is detected by heartbeats on both sides and nothing is left running") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  Subprocess launcher(Launch(*c, dir, {"--heartbeat_timeout", "2"}, {"--hang", "--ignore_sigterm"}));
  REQUIRE(WaitFor([&] { return ReadPidFiles(dir.path()).size() == 8; }, std::chrono::seconds(60)));
  auto pids = ReadPidFiles(dir.path());
  // Cut node 2 off: its link on the bridge goes down, so no packet reaches either side.
  REQUIRE(RunProcess({"/sbin/ip", "link", "set", "dslv2", "down"}, std::chrono::seconds(10)).exit_code == 0);
  auto r = launcher.Wait(kRunTimeout);
  RunProcess({"/sbin/ip", "link", "set", "dslv2", "up"}, std::chrono::seconds(10));
  INFO(r.err);
  CHECK(r.exit_code == kExitInfrastructure);
  CHECK(Contains(r.err, "lost the agent of node 2 on host " + c->Addr(2)));
  CHECK(Contains(r.err, "no heartbeat"));
  // Node 2's agent stops its workers after its own heartbeat timeout and the grace period.
  CHECK(WaitFor([&] { return AllDead(pids); }, std::chrono::seconds(15)));
}

TEST_CASE("An unknown host key is refused before anything starts, with the fingerprint") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  std::string empty_known_hosts = dir.path() + "/known_hosts";
  std::ofstream(empty_known_hosts) << "";
  auto argv = Launch(*c, dir, {"--ssh_known_hosts", empty_known_hosts}, {});
  auto r = RunProcess(argv, kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == kExitInfrastructure);
  CHECK(Contains(r.err, c->Addr(0)));
  CHECK(Contains(r.err, "SHA256:"));
  CHECK(Contains(r.err, "--ssh_accept_new_host_keys"));
  CHECK(ReadPidFiles(dir.path()).empty());
}

TEST_CASE("--ssh_accept_new_host_keys records the unknown host keys in --ssh_known_hosts and the job runs") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  std::string empty_known_hosts = dir.path() + "/known_hosts";
  std::ofstream(empty_known_hosts) << "";
  auto r = RunProcess(Launch(*c, dir, {"--ssh_known_hosts", empty_known_hosts, "--ssh_accept_new_host_keys"},
                             {"--expect_world", "8"}),
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  std::ifstream recorded(empty_known_hosts);
  std::string line;
  int lines = 0;
  while (std::getline(recorded, line)) lines += line.empty() ? 0 : 1;
  CHECK(lines == kNodes);
}

TEST_CASE("--ssh_port and --ssh_user are what the launcher logs in with: another port or user is refused, naming it") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  // Nothing listens on port 2222 of the nodes.
  auto port = RunProcess(Launch(*c, dir, {"--ssh_port", "2222"}, {}), kRunTimeout);
  INFO(port.err);
  CHECK(port.exit_code == kExitInfrastructure);
  CHECK(Contains(port.err, "node 0 (" + c->Addr(0) + "): port 2222: cannot connect (timeout "));
  // The nodes let only root in with the cluster's key; the hostfile names no user.
  TempDir user_dir;
  auto user = RunProcess(Launch(*c, user_dir, {"--ssh_user", "nobody"}, {}), kRunTimeout);
  INFO(user.err);
  CHECK(user.exit_code == kExitInfrastructure);
  CHECK(Contains(user.err, "node 0 (" + c->Addr(0) + "): authentication as 'nobody' failed"));
  CHECK(ReadPidFiles(dir.path()).empty());
  CHECK(ReadPidFiles(user_dir.path()).empty());
}

TEST_CASE("An unreachable host is reported by pre-flight and nothing starts anywhere") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  std::string hosts = dir.path() + "/hosts";
  std::filesystem::copy_file(c->hostfile(), hosts);
  std::ofstream(hosts, std::ios::app) << "172.30.77.99 slots=2\n";
  auto argv = Launch(*c, dir, {"--hostfile", hosts, "--ssh_connect_timeout", "1"}, {});
  auto r = RunProcess(argv, kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == kExitInfrastructure);
  CHECK(Contains(r.err, "172.30.77.99"));
  CHECK(Contains(r.err, "nothing was started"));
  // --ssh_connect_timeout 1 is the connect's own limit: the address times out after 1 s.
  CHECK(Contains(r.err, "node 4 (172.30.77.99): cannot connect (timeout 1000 ms): Timeout connecting to 172.30.77.99\n"));
  CHECK(r.seconds < 9);
  CHECK(ReadPidFiles(dir.path()).empty());
}

TEST_CASE("An env file in the home directory reaches every rank on every node") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  std::ofstream(dir.path() + "/.dslaunch_env") << "# test\nDSL_CLUSTER_TEST='from the env file'\n";
  auto r = RunProcess(Launch(*c, dir, {}, {"--expect_env", "DSL_CLUSTER_TEST=from the env file"}), kRunTimeout,
                      {"HOME=" + dir.path()});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.out, "rank 7 of 8: environment ok"));
}

// What a torchrun user runs, unchanged: a plain PyTorch DDP script with the gloo backend over the
// env:// rendezvous, 3 nodes x 2 ranks over SSH. Each node's hostname resolves to loopback there
// (as Debian's /etc/hosts makes it), so it runs only because the agent sets GLOO_SOCKET_IFNAME.
TEST_CASE("A PyTorch DDP script with gloo runs over SSH on three nodes and ends with the same parameters on every rank") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  DSLAUNCH_SKIP_UNLESS(PythonHasTorch(), "torch", "/usr/bin/python3 cannot import torch (Debian's python3-torch)");
  TempDir dir;
  std::vector<std::string> argv = {kLauncher, "--hostfile", c->hostfile(), "--ssh_identity", c->dir() + "/id_ed25519",
                                   "--ssh_known_hosts", c->dir() + "/known_hosts", "--log_dir", dir.path() + "/logs",
                                   "--num_nodes", "3", "--python", "/usr/bin/python3", "--no_local_rank",
                                   kSource + "/tests/programs/ddp_gloo.py"};
  auto r = RunProcess(argv, std::chrono::seconds(240));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::string checksum;
  for (int rank = 0; rank < 3 * kSlots; ++rank) {
    CAPTURE(rank);
    const std::string head = "rank " + std::to_string(rank) + " of 6 on node " + std::to_string(rank / kSlots) +
                             ": ddp ok, parameters equal on every rank: True, checksum ";
    const size_t at = r.out.find(head);
    REQUIRE(at != std::string::npos);
    const std::string sum = r.out.substr(at + head.size(), r.out.find('\n', at) - at - head.size());
    if (checksum.empty()) checksum = sum;
    CHECK(sum == checksum);
  }
  CHECK_FALSE(Contains(r.err, "MASTER_ADDR"));  // the first host is rank 0's own: no warning
}

}  // namespace
}  // namespace dslaunch::testing
