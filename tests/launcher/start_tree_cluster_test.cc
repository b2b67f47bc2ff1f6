// Cluster tests of the start tree (docs/ssh.md, "The start tree"): the fixture's four nodes started
// through relays by forcing the tree with a small --ssh_tree_threshold and --ssh_fanout. Which host
// opened each node's SSH session is read from that node's sshd log (scripts/netns-cluster.sh).
#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/exit_codes.h"
#include "tests/support/cluster.h"
#include "tests/support/proc_checks.h"
#include "tests/support/skip.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kBin = DSLAUNCH_BIN_DIR;
const std::string kLauncher = kBin + "/dslaunch";
const std::string kEnvCheck = kBin + "/env_check";
constexpr int kNodes = 4;
constexpr int kSlots = 2;
constexpr std::chrono::seconds kRunTimeout{90};

std::vector<std::string> Launch(const Cluster& c, const TempDir& dir, std::vector<std::string> options,
                                std::vector<std::string> worker_args) {
  std::vector<std::string> argv = {kLauncher, "--ssh_identity", c.dir() + "/id_ed25519", "--ssh_known_hosts",
                                   c.dir() + "/known_hosts", "--log_dir", dir.path() + "/logs", "--grace_period", "1"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"--no_python", kEnvCheck, "--pid_dir", dir.path()});
  argv.insert(argv.end(), worker_args.begin(), worker_args.end());
  return argv;
}

std::string SshdLog(const Cluster& c, int node) {
  std::ifstream in(c.dir() + "/node" + std::to_string(node) + "/sshd.log");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// How many logins node `node`'s sshd accepted from `from` (an address); the bridge is the launcher.
int LoginsFrom(const Cluster& c, int node, const std::string& from) {
  const std::string log = SshdLog(c, node), needle = "Accepted publickey for root from " + from + " ";
  int n = 0;
  for (size_t at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) ++n;
  return n;
}

const std::string kBridge = "172.30.77.1";

// The start relays running on this machine (every namespace shares its PID space): processes
// whose command line is exactly `dslaunch-agent --start_relay`.
std::vector<pid_t> StartRelays() {
  const std::string agent = kBin + "/dslaunch-agent";
  const std::string wanted = agent + std::string(1, '\0') + "--start_relay" + std::string(1, '\0');
  std::vector<pid_t> pids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (ReadWhole(entry.path() / "cmdline") == wanted) pids.push_back(std::stoi(name));
  }
  return pids;
}

TEST_CASE("A start tree of fanout 1 (a chain of relays) runs a four-node job to completion") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  // Logins before this job, so that only its own are counted.
  std::vector<int> before;
  for (int i = 0; i < kNodes; ++i) before.push_back(LoginsFrom(*c, i, i == 0 ? kBridge : c->Addr(i - 1)));
  auto r = RunProcess(Launch(*c, dir, {"--hostfile", c->hostfile(), "--ssh_tree_threshold", "2", "--ssh_fanout", "1"},
                             {"--expect_world", "8", "--expect_local_world", "2", "--expect_nodes", "4"}),
                      kRunTimeout);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  for (int rank = 0; rank < kNodes * kSlots; ++rank) {
    CAPTURE(rank);
    CHECK(Contains(r.out, "[rank " + std::to_string(rank) + " " + c->Addr(rank / kSlots) + "] rank " +
                              std::to_string(rank) + " of 8: environment ok\n"));
  }
  // Node 0 was reached from the launcher, node i from node i-1: the chain 0 -> 1 -> 2 -> 3.
  for (int i = 0; i < kNodes; ++i) {
    CAPTURE(i);
    CHECK(LoginsFrom(*c, i, i == 0 ? kBridge : c->Addr(i - 1)) == before[i] + 1);
  }
  auto pids = ReadPidFiles(dir.path());
  CHECK(pids.size() == 8);
  CHECK(AllDead(pids));
}

TEST_CASE("A start tree of two heads (fanout 2) runs a four-node job, each head starting its one node") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  const int from_head0 = LoginsFrom(*c, 1, c->Addr(0)), from_head2 = LoginsFrom(*c, 3, c->Addr(2));
  auto r = RunProcess(Launch(*c, dir, {"--hostfile", c->hostfile(), "--ssh_tree_threshold", "2", "--ssh_fanout", "2"},
                             {"--expect_world", "8", "--expect_nodes", "4", "--fail_rank", "5", "--exit_code", "4"}),
                      kRunTimeout);
  INFO(r.err);
  // Rank 5 (node 2, a head) fails: the job's exit code and the host come back as without a tree.
  CHECK(r.exit_code == 4);
  CHECK(Contains(r.err, "rank 5 on host " + c->Addr(2)));
  CHECK(LoginsFrom(*c, 1, c->Addr(0)) == from_head0 + 1);
  CHECK(LoginsFrom(*c, 3, c->Addr(2)) == from_head2 + 1);
  auto pids = ReadPidFiles(dir.path());
  CHECK(pids.size() == 8);
  CHECK(AllDead(pids));
}

TEST_CASE("Relays killed in the middle of a job leave their subtrees running, and a stop still ends every node") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  Subprocess launcher(Launch(*c, dir,
                             {"--hostfile", c->hostfile(), "--ssh_tree_threshold", "2", "--ssh_fanout", "2",
                              "--heartbeat_timeout", "2"},
                             {"--hang"}));
  REQUIRE(WaitFor([&] { return ReadPidFiles(dir.path()).size() == 8; }, std::chrono::seconds(60)));
  auto pids = ReadPidFiles(dir.path());
  std::vector<pid_t> relays = StartRelays();
  REQUIRE(relays.size() == 2);  // heads node 0 and node 2
  for (pid_t p : relays) ::kill(p, SIGKILL);
  // Longer than the heartbeat timeout: an agent whose SSH session went with its relay is still
  // connected to the launcher, so nothing is lost and every worker still runs.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  CHECK(AllDead(relays));
  for (pid_t p : pids) CHECK(ProcessAlive(p));
  // Teardown does not need the tree: STOP goes to each agent over its own control connection.
  launcher.Signal(SIGINT);
  auto r = launcher.Wait(kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code != -1);  // the launcher ended, it was not killed by Wait's timeout
  CHECK_FALSE(Contains(r.err, "lost the agent"));
  CHECK(AllDead(pids));
}

TEST_CASE("An unreachable host in a head's subtree is named in the pre-flight report and nothing starts") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  // Five nodes, threshold 2, fanout 2: heads node 0 (nodes 1, 2 below it) and node 3 (node 4
  // below it). Node 4 does not exist: only the relay on node 3 can find that out.
  std::string hosts = dir.path() + "/hosts";
  std::filesystem::copy_file(c->hostfile(), hosts);
  std::ofstream(hosts, std::ios::app) << "172.30.77.99 slots=2\n";
  const int relay_logins = LoginsFrom(*c, 3, kBridge);
  auto r = RunProcess(Launch(*c, dir,
                             {"--hostfile", hosts, "--ssh_connect_timeout", "1", "--ssh_tree_threshold", "2",
                              "--ssh_fanout", "2"},
                             {}),
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == kExitInfrastructure);
  CHECK(Contains(r.err, "pre-flight failed on 1 of 5 nodes; nothing was started:\n"));
  CHECK(Contains(r.err, "  node 4 (172.30.77.99): "));
  CHECK(LoginsFrom(*c, 3, kBridge) == relay_logins + 1);  // node 3 was a head
  CHECK(ReadPidFiles(dir.path()).empty());
}

TEST_CASE("An elastic job through a start tree runs on the nodes that pass, without the one a relay could not reach") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  // As above: node 4 (nowhere) is below the head node 3; the range 4:5 lets the job run without it.
  std::string hosts = dir.path() + "/hosts";
  std::filesystem::copy_file(c->hostfile(), hosts);
  std::ofstream(hosts, std::ios::app) << "172.30.77.99 slots=2\n";
  auto r = RunProcess(Launch(*c, dir,
                             {"--hostfile", hosts, "--ssh_connect_timeout", "1", "--ssh_tree_threshold", "2",
                              "--ssh_fanout", "2", "--nnodes", "4:5"},
                             {"--expect_world", "8"}),
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.err, "dslaunch: pre-flight failed on node 4 (172.30.77.99): cannot connect"));
  CHECK(Contains(r.out, "[rank 7 " + c->Addr(3) + "] rank 7 of 8: environment ok\n"));
  CHECK(AllDead(ReadPidFiles(dir.path())));
}

TEST_CASE("A host four relays down is named in the pre-flight report") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  // Fanout 1: the chain 0 -> 1 -> 2 -> 3 -> 4, and node 4 does not exist: its failure travels up
  // through the relays on nodes 3, 2, 1 and 0.
  std::string hosts = dir.path() + "/hosts";
  std::filesystem::copy_file(c->hostfile(), hosts);
  std::ofstream(hosts, std::ios::app) << "172.30.77.99 slots=2\n";
  auto r = RunProcess(Launch(*c, dir,
                             {"--hostfile", hosts, "--ssh_connect_timeout", "1", "--ssh_tree_threshold", "2",
                              "--ssh_fanout", "1"},
                             {}),
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == kExitInfrastructure);
  CHECK(Contains(r.err, "pre-flight failed on 1 of 5 nodes; nothing was started:\n"));
  CHECK(Contains(r.err, "  node 4 (172.30.77.99): cannot connect"));
  CHECK(ReadPidFiles(dir.path()).empty());
}

TEST_CASE("A head that cannot be reached is reported, and the next node of its group checks the rest") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  // Fanout 1: one group of all five nodes; its first node (nowhere) fails, and node 1 (the
  // cluster's first) becomes the head of the other three, which all pass.
  std::string hosts = dir.path() + "/hosts";
  std::ofstream(hosts) << "172.30.77.99 slots=2\n" << std::ifstream(c->hostfile()).rdbuf();
  const int from_new_head = LoginsFrom(*c, 1, c->Addr(0));
  auto r = RunProcess(Launch(*c, dir,
                             {"--hostfile", hosts, "--ssh_connect_timeout", "1", "--ssh_tree_threshold", "2",
                              "--ssh_fanout", "1"},
                             {}),
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == kExitInfrastructure);
  CHECK(Contains(r.err, "pre-flight failed on 1 of 5 nodes; nothing was started:\n"));
  CHECK(Contains(r.err, "  node 0 (172.30.77.99): "));
  CHECK(LoginsFrom(*c, 1, c->Addr(0)) == from_new_head + 1);  // the relay on the promoted head
  CHECK(ReadPidFiles(dir.path()).empty());
}

}  // namespace
}  // namespace dslaunch::testing
