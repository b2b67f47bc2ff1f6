// Benchmark: how fast SshAgentStarter gets agents running on the namespaced test cluster.
//
//   ssh_start_bench CLUSTER_DIR NODES [ROUNDS [FANOUT [TREE_THRESHOLD]]]
//                                                  (scripts/netns-cluster.sh up NODES first)
//
// Per round: NODES sequential SshConnection::Connect calls (connect + host key + auth, then
// disconnect); then Preflight on all NODES; then Start on each; then the wait until every
// stand-in agent has reported that it runs (it printed its first line after reading the secret).
// Prints the median of each phase over ROUNDS after one warm-up round. Each stand-in agent runs for
// a second after it reported, so that the threads counted are those of running agents. The stand-in agent is a
// /bin/sh script, so the figures are dslaunch's SSH start-up cost, not dslaunch-agent's; asked to
// be a start relay (a start tree, NODES > TREE_THRESHOLD) it execs the real dslaunch-agent next to
// this program. FANOUT and TREE_THRESHOLD are --ssh_fanout and --ssh_tree_threshold (defaults 32
// and 256). Also prints the launcher's threads once every agent runs.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "launcher/start/ssh/agent_starter.h"
#include "launcher/start/ssh/connection.h"

namespace dslaunch::launcher {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Round {
  double connect_each_ms = 0;  // mean of the sequential connects
  double preflight_ms = 0;
  double start_ms = 0;
  double running_ms = 0;  // from the start of Preflight until every agent runs
  int threads = 0;        // this process's threads once every agent runs
};

// Threads of this process now (/proc/self/status).
int ThreadCount() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return 0;
}

Result<Round> RunRound(const std::string& dir, int nodes, const std::string& agent, int fanout, int threshold) {
  SshOptions options;
  options.fanout = fanout;
  options.tree_threshold = threshold;
  options.identities = {dir + "/id_ed25519"};
  options.known_hosts = dir + "/known_hosts";
  Round round;
  std::vector<NodePlan> plan(nodes);
  for (int i = 0; i < nodes; ++i) {
    plan[i].node_rank = i;
    plan[i].host = "172.30.77." + std::to_string(10 + i);
  }
  auto t0 = Clock::now();
  for (const NodePlan& node : plan) {
    DSLAUNCH_ASSIGN_OR_RETURN(auto connection, SshConnection::Connect("", node.host, options));
  }
  round.connect_each_ms = Ms(Clock::now() - t0) / nodes;

  SshAgentStarter starter(options);
  std::mutex mu;
  std::condition_variable cv;
  int running = 0, ended = 0;
  auto t1 = Clock::now();
  DSLAUNCH_RETURN_IF_ERROR(starter.Preflight(plan, {agent, "dslaunch-agent 0.1.0", "/tmp"}));
  auto t2 = Clock::now();
  std::vector<std::unique_ptr<AgentHandle>> handles;
  for (const NodePlan& node : plan) {
    AgentCallbacks callbacks{[&](std::string line) {
                               std::lock_guard lock(mu);
                               if (line == "running") ++running;
                               cv.notify_all();
                             },
                             [&](std::optional<ExitStatus>, std::string) {
                               std::lock_guard lock(mu);
                               ++ended;
                               cv.notify_all();
                             }};
    AgentCommand command{agent, "", 4242, "bench", node.node_rank, std::nullopt};
    DSLAUNCH_ASSIGN_OR_RETURN(auto handle, starter.Start(node, command, "secret", std::move(callbacks)));
    handles.push_back(std::move(handle));
  }
  auto t3 = Clock::now();
  {
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(30), [&] { return running == nodes; })) {
      return DeadlineExceededError("not every agent reported running within 30 s");
    }
  }
  auto t4 = Clock::now();
  round.threads = ThreadCount();
  {
    std::unique_lock lock(mu);
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return ended == nodes; });
  }
  round.preflight_ms = Ms(t2 - t1);
  round.start_ms = Ms(t3 - t2);
  round.running_ms = Ms(t4 - t1);
  return round;
}

int Main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: ssh_start_bench CLUSTER_DIR NODES [ROUNDS [FANOUT [TREE_THRESHOLD]]]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int nodes = std::stoi(argv[2]);
  const int rounds = argc > 3 ? std::stoi(argv[3]) : 5;
  const int fanout = argc > 4 ? std::stoi(argv[4]) : kSshDefaultFanout;
  const int threshold = argc > 5 ? std::stoi(argv[5]) : kSshDefaultTreeThreshold;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  const std::string relay = std::filesystem::path(self).parent_path() / "dslaunch-agent";
  const std::string agent = dir + "/bench-agent";
  std::ofstream(agent) << "#!/bin/sh\n"
                          "if [ \"$1\" = --version ]; then echo 'dslaunch-agent 0.1.0'; exit 0; fi\n"
                          "if [ \"$1\" = --start_relay ]; then exec '" << relay << "' --start_relay; fi\n"
                          "read -r secret; echo running; sleep 1\n";
  ::chmod(agent.c_str(), 0755);
  std::vector<double> connect, preflight, start, running;
  int threads = 0;
  for (int r = 0; r <= rounds; ++r) {
    Result<Round> round = RunRound(dir, nodes, agent, fanout, threshold);
    if (!round.ok()) {
      std::fprintf(stderr, "ssh_start_bench: %s\n", round.status().ToString().c_str());
      return 1;
    }
    if (r == 0) continue;  // warm-up
    connect.push_back(round->connect_each_ms);
    preflight.push_back(round->preflight_ms);
    start.push_back(round->start_ms);
    running.push_back(round->running_ms);
    threads = std::max(threads, round->threads);
  }
  std::printf("| nodes | fanout | tree | connect+auth per host (sequential) ms | Preflight ms | Start (all nodes) ms | "
              "Preflight to all agents running ms | launcher threads, all running |\n"
              "|---|---|---|---|---|---|---|---|\n");
  std::printf("| %d | %d | %s | %.1f | %.1f | %.1f | %.1f | %d |\n", nodes, fanout,
              nodes > threshold ? "yes" : "no", Median(connect), Median(preflight), Median(start), Median(running),
              threads);
  return 0;
}

}  // namespace
}  // namespace dslaunch::launcher

int main(int argc, char** argv) { return dslaunch::launcher::Main(argc, argv); }
