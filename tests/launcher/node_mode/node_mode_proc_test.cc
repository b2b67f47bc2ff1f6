// Proc tests of node mode (docs/node-mode.md): several dslaunch processes on this machine play the
// nodes of one job, each started on its own as a scheduler would, finding each other at the
// rendezvous endpoint (the one that hosts it binds it on all addresses; 127.0.0.1 reaches it).
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>

#include "common/exit_codes.h"
#include "tests/support/proc_checks.h"
#include "tests/support/reserved_port.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kBin = DSLAUNCH_BIN_DIR;
const std::string kLauncher = kBin + "/dslaunch";
const std::string kEnvCheck = kBin + "/env_check";
constexpr std::chrono::seconds kRunTimeout{90};
const std::vector<std::string> kSecret = {"DSLAUNCH_JOB_SECRET=0123456789abcdef0123456789abcdef"};

// This machine's hostname: every node of these tests has it.
std::string Hostname() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

// Whether something listens on 127.0.0.1:port.
bool Listening(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return up;
}

// One node's command: `options` (node rank, node count, ...) then env_check.
std::vector<std::string> Node(const TempDir& dir, const ReservedPort& port, std::vector<std::string> options,
                              std::vector<std::string> worker_args) {
  std::vector<std::string> argv = {kLauncher, "--rdzv_endpoint", "127.0.0.1:" + std::to_string(port.port()),
                                   "--log_dir", dir.path() + "/logs", "--grace_period", "2"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"--no_python", kEnvCheck, "--pid_dir", dir.path()});
  argv.insert(argv.end(), worker_args.begin(), worker_args.end());
  return argv;
}

// `options` and --node_rank `rank`.
std::vector<std::string> WithRank(std::vector<std::string> options, const char* rank) {
  options.insert(options.end(), {"--node_rank", rank});
  return options;
}

TEST_CASE("Node mode: two nodes started in any order, one numbered by PET_ variables, run one job") {
  TempDir dir;
  ReservedPort port;
  const std::vector<std::string> expect = {"--expect_world", "4", "--expect_nodes", "2", "--expect_local_world", "2"};
  // Node 1 first, as a pod may be: its agent waits for node 0 to listen.
  std::vector<std::string> env1 = kSecret;
  env1.insert(env1.end(), {"PET_NODE_RANK=1", "PET_NNODES=2", "PET_NPROC_PER_NODE=2"});
  Subprocess node1(Node(dir, port, {}, expect), env1);
  Subprocess node0(Node(dir, port, {"--nnodes", "2", "--node_rank", "0", "--nproc-per-node", "2"}, expect), kSecret);
  auto r0 = node0.Wait(kRunTimeout);
  auto r1 = node1.Wait(kRunTimeout);
  INFO(r0.err);
  INFO(r1.err);
  CHECK(r0.exit_code == 0);
  CHECK(r1.exit_code == 0);
  CHECK(Contains(r0.err, "dslaunch: rendezvous complete: 2 nodes, 4 workers"));
  CHECK(Contains(r1.err, "dslaunch: joining the rendezvous of job rdzv-127.0.0.1-" + std::to_string(port.port()) +
                             " at 127.0.0.1:" + std::to_string(port.port()) + " with 2 workers as node 1\n"));
  for (int rank = 0; rank < 4; ++rank) {
    CHECK(Contains(r0.out, "rank " + std::to_string(rank) + " of 4: environment ok"));
  }
  CheckNoWorkerAlive(dir.path(), 4);
}

TEST_CASE("Node mode: without node ranks the node at the endpoint hosts it and the others are numbered by arrival") {
  TempDir dir;
  ReservedPort port;
  // Three nodes of one worker each; the first one started hosts (the endpoint is this machine's,
  // and nothing listens on its port yet), the others find the port taken and join.
  const std::vector<std::string> options = {"--nnodes", "3"};
  const std::vector<std::string> expect = {"--expect_world", "3", "--expect_nodes", "3"};
  Subprocess host(Node(dir, port, options, expect), kSecret);
  REQUIRE(WaitFor([&] { return Listening(port.port()); }, std::chrono::seconds(30)));
  Subprocess a(Node(dir, port, options, expect), kSecret);
  Subprocess b(Node(dir, port, options, expect), kSecret);
  auto rh = host.Wait(kRunTimeout);
  auto ra = a.Wait(kRunTimeout);
  auto rb = b.Wait(kRunTimeout);
  INFO(rh.err);
  CHECK(rh.exit_code == 0);
  CHECK(ra.exit_code == 0);
  CHECK(rb.exit_code == 0);
  CHECK(Contains(rh.err, "rendezvous complete: 3 nodes, 3 workers"));
  CHECK(Contains(ra.err, "joining the rendezvous"));
  CHECK(Contains(rb.err, "joining the rendezvous"));
  CHECK(Contains(rh.out, "[rank 0 "));  // rank 0 runs on the node that hosts (MASTER_ADDR's)
  CheckNoWorkerAlive(dir.path(), 3);
}

TEST_CASE("Node mode: every node exits with the job's code, the failed rank's on another node included") {
  TempDir dir;
  ReservedPort port;
  const std::vector<std::string> worker = {"--fail_rank", "3", "--exit_code", "5"};
  Subprocess node0(Node(dir, port, {"--nnodes", "2", "--node_rank", "0", "--nproc_per_node", "2"}, worker), kSecret);
  Subprocess node1(Node(dir, port, {"--nnodes", "2", "--node_rank", "1", "--nproc_per_node", "2"}, worker), kSecret);
  auto r0 = node0.Wait(kRunTimeout);
  auto r1 = node1.Wait(kRunTimeout);
  INFO(r0.err);
  INFO(r1.err);
  CHECK(r0.exit_code == 5);
  CHECK(r1.exit_code == 5);
  CHECK(Contains(r0.err, "failed: rank 3 on host "));
  CheckNoWorkerAlive(dir.path(), 4);
}

TEST_CASE("Node mode: a node whose workers finish long before the others' keeps its agent until the end") {
  // Node 0's worker exits at once, node 1's after several heartbeat timeouts: node 0's agent,
  // waiting for RELEASE, must go on hearing the launcher's heartbeats (before issue 16 it was sent
  // none once its workers were done, and gave up on the launcher after the timeout).
  TempDir dir;
  ReservedPort port;
  auto node = [&](const char* rank) {
    return std::vector<std::string>{kLauncher, "--rdzv_endpoint", "127.0.0.1:" + std::to_string(port.port()),
                                    "--log_dir", dir.path() + "/logs", "--heartbeat_timeout", "1", "--nnodes", "2",
                                    "--nproc_per_node", "1", "--node_rank", rank, "--no_python", "/bin/sh", "-c",
                                    "if [ \"$RANK\" = 1 ]; then sleep 4; fi"};
  };
  Subprocess node0(node("0"), kSecret);
  Subprocess node1(node("1"), kSecret);
  auto r0 = node0.Wait(kRunTimeout);
  auto r1 = node1.Wait(kRunTimeout);
  INFO(r0.err);
  INFO(r1.err);
  CHECK(r0.exit_code == 0);
  CHECK(r1.exit_code == 0);
  CHECK_FALSE(Contains(r0.err, "no heartbeat from the launcher"));
}

TEST_CASE("Node mode: nodes whose workers do not fit the host's descriptor limit stop the rendezvous") {
  // Node 0 sized its endpoint for 2 x 1 ranks; node 1 brings 400, each with a connection of its
  // own (the direct path). The host finds out when node 1 joins and stops everything before a
  // worker starts, with the numbers.
  TempDir dir;
  ReservedPort port;
  const std::string marker = dir.path() + "/started";
  auto node = [&](const char* rank, const char* nproc) {
    return std::vector<std::string>{kLauncher, "--rdzv_endpoint", "127.0.0.1:" + std::to_string(port.port()),
                                    "--log_dir", dir.path() + "/logs", "--nnodes", "2", "--nproc_per_node", nproc,
                                    "--node_rank", rank, "--no_python", "/usr/bin/touch", marker};
  };
  std::vector<std::string> host = node("0", "1");
  host.insert(host.begin(), {"/usr/bin/prlimit", "--nofile=500:500"});
  host.insert(host.begin() + 3, {"--store_proxy", "off"});
  Subprocess node0(host, kSecret);
  Subprocess node1(node("1", "400"), kSecret);
  auto r0 = node0.Wait(kRunTimeout);
  auto r1 = node1.Wait(kRunTimeout);
  INFO(r0.err);
  INFO(r1.err);
  CHECK(r0.exit_code == 2);
  CHECK(r1.exit_code == 2);
  CHECK(Contains(r0.err, "rendezvous failed: 401 ranks on 2 nodes need up to"));
  CHECK(Contains(r0.err, "the launcher's descriptor limit is 500"));
  CHECK(::access(marker.c_str(), F_OK) != 0);  // no worker ran
}

TEST_CASE("Node mode: a lost node stops the job everywhere with the infrastructure code") {
  TempDir dir;
  ReservedPort port;
  const std::vector<std::string> worker = {"--hang"};
  const std::vector<std::string> timing = {"--heartbeat_timeout", "2", "--nnodes", "2", "--nproc_per_node", "1"};
  Subprocess node0(Node(dir, port, WithRank(timing, "0"), worker), kSecret);
  Subprocess node1(Node(dir, port, WithRank(timing, "1"), worker), kSecret);
  REQUIRE(WaitFor([&] { return ReadPidFiles(dir.path()).size() == 2; }, std::chrono::seconds(60)));
  // Node 1's dslaunch became its agent (exec): SIGKILL takes the node away, its worker with it.
  node1.Signal(SIGKILL);
  auto r0 = node0.Wait(kRunTimeout);
  INFO(r0.err);
  CHECK(r0.exit_code == kExitInfrastructure);
  CHECK(Contains(r0.err, "lost the agent of node 1"));
  CHECK(WaitFor(
      [&] {
        for (pid_t pid : ReadPidFiles(dir.path())) {
          if (ProcessAlive(pid)) return false;
        }
        return true;
      },
      std::chrono::seconds(20)));
}

TEST_CASE("Node mode: an elastic job shrinks when a node is lost and grows again when a replacement rejoins") {
  TempDir dir;
  ReservedPort port;
  // Generations 0 and 1 hang until stopped; generation 2 (after the rejoin) meets and ends.
  const std::vector<std::string> worker = {"--hang", "--until_generation", "2"};
  auto node = [&](const char* rank) {
    return Node(dir, port, {"--nnodes", "2:3", "--node_rank", rank, "--max_restarts", "3", "--heartbeat_timeout", "2",
                            "--rdzv_conf", "last_call_timeout=30"},
                worker);
  };
  Subprocess node0(node("0"), kSecret);
  Subprocess node1(node("1"), kSecret);
  auto node2 = std::make_unique<Subprocess>(node("2"), kSecret);
  REQUIRE(WaitFor([&] { return ReadPidFiles(dir.path()).size() == 3; }, std::chrono::seconds(60)));
  node2->Signal(SIGKILL);  // node 2 is lost; 2 nodes are enough to go on
  auto gen1 = [&] {
    return std::filesystem::exists(dir.path() + "/rank0.gen1.pid") &&
           std::filesystem::exists(dir.path() + "/rank1.gen1.pid");
  };
  REQUIRE(WaitFor(gen1, std::chrono::seconds(60)));
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/rank2.gen1.pid"));
  // The Job controller's replacement: the same command, the same node rank.
  Subprocess replacement(node("2"), kSecret);
  auto r0 = node0.Wait(kRunTimeout);
  auto r1 = node1.Wait(kRunTimeout);
  auto r2 = replacement.Wait(kRunTimeout);
  INFO(r0.err);
  CHECK(r0.exit_code == 0);
  CHECK(r1.exit_code == 0);
  CHECK(r2.exit_code == 0);
  CHECK(Contains(r0.err, "rejoined in the place of node 2"));
  CHECK(std::filesystem::exists(dir.path() + "/rank2.gen2.pid"));  // generation 2 ran on 3 nodes
}

TEST_CASE("Node mode: a replacement that comes while the lost node's generation still stops is told to come back later") {
  TempDir dir;
  ReservedPort port;
  // Workers ignore SIGTERM, so the stop after the loss lasts its whole grace (kFailureStopGrace);
  // generation 1 meets and ends.
  const std::vector<std::string> worker = {"--hang", "--ignore_sigterm", "--until_generation", "1"};
  const std::vector<std::string> options = {"--nnodes", "2:3", "--max_restarts", "2"};
  Subprocess node0(Node(dir, port, WithRank(options, "0"), worker), kSecret);
  Subprocess node1(Node(dir, port, WithRank(options, "1"), worker), kSecret);
  auto node2 = std::make_unique<Subprocess>(Node(dir, port, WithRank(options, "2"), worker), kSecret);
  REQUIRE(WaitFor([&] { return ReadPidFiles(dir.path()).size() == 3; }, std::chrono::seconds(60)));
  node2->Signal(SIGKILL);
  auto early = RunProcess(Node(dir, port, WithRank(options, "2"), worker), kRunTimeout, kSecret);
  auto r0 = node0.Wait(kRunTimeout);
  auto r1 = node1.Wait(kRunTimeout);
  INFO(r0.err);
  INFO(early.err);
  CHECK(early.exit_code == kExitInfrastructure);  // a scheduler replaces it again, uncounted
  // Both sides say why: the place is held, not that the job ended (issue 25).
  const std::string why = "the place of node 2 (" + Hostname() + ") is still held by a live member of the job; try again later";
  CHECK(Contains(r0.err, "dslaunch: rendezvous: not letting " + Hostname() + " in: " + why + "\n"));
  CHECK(Contains(early.err, "dslaunch-agent[" + Hostname() + "]: registration failed: unavailable: the launcher did not let "
                            "this node in: " + why + " (exit code 75)\n"));
  CHECK(r0.exit_code == 0);  // generation 1 on the two others
  CHECK(r1.exit_code == 0);
}

TEST_CASE("Node mode: too few nodes within the join timeout ends with the infrastructure code, naming who came") {
  TempDir dir;
  ReservedPort port;
  auto r = RunProcess(Node(dir, port, {"--nnodes", "3", "--node_rank", "0", "--rdzv_conf", "join_timeout=1"}, {}),
                      kRunTimeout, kSecret);
  INFO(r.err);
  CHECK(r.exit_code == kExitInfrastructure);
  CHECK(Contains(r.err, "dslaunch: rendezvous failed: only 1 of at least 3 nodes joined within 1 s (joined: "));
  CHECK(ReadPidFiles(dir.path()).empty());
}

TEST_CASE("Node mode: a node asking for a taken node rank is refused with the usage code") {
  TempDir dir;
  ReservedPort port;
  const std::vector<std::string> options = {"--nnodes", "3", "--rdzv_conf", "join_timeout=5"};
  Subprocess host(Node(dir, port, WithRank(options, "0"), {}), kSecret);
  REQUIRE(WaitFor([&] { return Listening(port.port()); }, std::chrono::seconds(30)));
  Subprocess first(Node(dir, port, WithRank(options, "1"), {}), kSecret);
  auto second = RunProcess(Node(dir, port, WithRank(options, "1"), {}), kRunTimeout, kSecret);
  INFO(second.err);
  auto rh = host.Wait(kRunTimeout);
  auto rf = first.Wait(kRunTimeout);
  // Either node 1 may be the one refused, depending on which joined first.
  const bool second_refused = second.exit_code == kExitUsage;
  CHECK((second_refused ? rf.exit_code : second.exit_code) == kExitInfrastructure);  // the join then timed out
  CHECK(Contains(second_refused ? second.err : rf.err, "asks for node rank 1, which node '"));
  CHECK(rh.exit_code == kExitInfrastructure);
  CHECK(Contains(rh.err, "only 2 of at least 3 nodes joined within 5 s"));
}

TEST_CASE("Node mode needs the shared secret, never from the command line") {
  TempDir dir;
  ReservedPort port;
  auto r = RunProcess(Node(dir, port, {"--nnodes", "2", "--node_rank", "0"}, {}), kRunTimeout, {"DSLAUNCH_JOB_SECRET="});
  CHECK(r.exit_code == kExitUsage);
  CHECK(Contains(r.err, "node mode needs the job secret on every node: --secret_file FILE"));
}

TEST_CASE("Node mode: --secret_file gives every node the secret, and --rdzv_id names the job they join") {
  TempDir dir;
  ReservedPort port;
  const std::string secret = dir.path() + "/secret";
  std::ofstream(secret) << "0123456789abcdef0123456789abcdef\n";
  REQUIRE(::chmod(secret.c_str(), 0600) == 0);
  const std::vector<std::string> expect = {"--expect_world", "2", "--expect_nodes", "2"};
  // No secret in the environment: only the file can let the nodes in.
  const std::vector<std::string> no_env_secret = {"DSLAUNCH_JOB_SECRET="};
  std::vector<std::string> options = {"--nnodes", "2", "--nproc_per_node", "1", "--secret_file", secret,
                                      "--rdzv_id", "named-job"};
  Subprocess node1(Node(dir, port, WithRank(options, "1"), expect), no_env_secret);
  Subprocess node0(Node(dir, port, WithRank(options, "0"), expect), no_env_secret);
  auto r0 = node0.Wait(kRunTimeout);
  auto r1 = node1.Wait(kRunTimeout);
  INFO(r0.err);
  INFO(r1.err);
  CHECK(r0.exit_code == 0);
  CHECK(r1.exit_code == 0);
  CHECK(Contains(r1.err, "dslaunch: joining the rendezvous of job named-job at 127.0.0.1:"));
  CHECK(std::filesystem::is_directory(dir.path() + "/logs/named-job"));
  CheckNoWorkerAlive(dir.path(), 2);
}

// dslaunch-agent as a joining node's dslaunch execs it, started here by hand: `options` after
// the endpoint, job id and node rank; the secret on its stdin.
std::vector<std::string> JoiningAgent(const ReservedPort& port, const std::string& job_id, const std::string& options) {
  return {"/bin/sh", "-c",
          "echo 0123456789abcdef0123456789abcdef | exec " + kBin + "/dslaunch-agent --endpoint 127.0.0.1:" +
              std::to_string(port.port()) + " --job_id " + job_id + " --node_rank 1 " + options};
}

TEST_CASE("Node mode: dslaunch-agent --slots joins with that many workers; --join_timeout and --exit_codes "
          "kubeflow: an agent never let in exits 203 after that many seconds") {
  TempDir dir;
  ReservedPort port;
  // The host runs one worker and waits for a second node: the agent's two workers make 3 ranks.
  const std::vector<std::string> expect = {"--expect_world", "3", "--expect_nodes", "2"};
  Subprocess host(Node(dir, port, {"--nnodes", "2", "--node_rank", "0", "--nproc_per_node", "1", "--rdzv_id", "agents"},
                       expect),
                  kSecret);
  auto joined = RunProcess(JoiningAgent(port, "agents", "--slots 2 --join_timeout 30"), kRunTimeout,
                           {"TMPDIR=" + dir.path()});
  auto hosted = host.Wait(kRunTimeout);
  INFO(joined.err);
  INFO(hosted.err);
  CHECK(joined.exit_code == 0);
  CHECK(hosted.exit_code == 0);
  CHECK(Contains(hosted.err, "dslaunch: rendezvous complete: 2 nodes, 3 workers"));
  CheckNoWorkerAlive(dir.path(), 3);

  // A host that waits for three nodes never lets the agent in before the agent's own timeout.
  TempDir waiting_dir;
  ReservedPort waiting_port;
  Subprocess waiting(Node(waiting_dir, waiting_port, {"--nnodes", "3", "--node_rank", "0", "--rdzv_id", "agents2"}, {}),
                     kSecret);
  REQUIRE(WaitFor([&] { return Listening(waiting_port.port()); }, std::chrono::seconds(30)));
  auto late = RunProcess(JoiningAgent(waiting_port, "agents2", "--slots 1 --join_timeout 2 --exit_codes kubeflow"),
                         kRunTimeout, {"TMPDIR=" + waiting_dir.path()});
  INFO(late.err);
  CHECK(late.exit_code == kExitInfrastructureKubeflow);
  CHECK(late.seconds >= 2.0);
  CHECK(late.seconds < 20);
  CHECK(Contains(late.err, "written as 203 (--exit_codes kubeflow)"));
  waiting.Signal(SIGTERM);
  waiting.Wait(kRunTimeout);
}

}  // namespace
}  // namespace dslaunch::testing
