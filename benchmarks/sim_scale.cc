// sim_scale: the control plane at scale, simulated against a real launcher on loopback
// (docs/benchmarks.md, "Control plane at scale"; scripts/sim-scale.sh runs it).
//
// It starts the real `dslaunch` in node mode as node 0 of M nodes (--nnodes M --node_rank 0
// --rdzv_endpoint 127.0.0.1:PORT --nproc_per_node 8): node 0's agent and its 8 workers
// (sim_scale_worker) are real processes; nodes 1..M-1 are simulated here, each an agent that
// speaks the real control protocol and 8 ranks that speak the real store protocol, from its own
// loopback address (127.1.x.y), all on one epoll thread. Then it times each phase (join, connect,
// barrier, broadcast, all-to-all, teardown; benchmarks/sim_scale/sim_node.h) and samples the
// launcher's own CPU time and memory around each. It checks every result: every simulated rank
// completes every phase with the right values, and the launcher exits 0 (its real ranks did too).
//
//   sim_scale --launcher build/bin/dslaunch --worker build/bin/sim_scale_worker --ranks 16384
//             [--mode direct|proxied] [--alltoall_max 2048] [--connect_window 512] [--json FILE]
//
// Exit 0 when every rank completed every phase; 1 (with what failed) otherwise; 2 for bad usage.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "benchmarks/sim_scale/launcher_process.h"
#include "benchmarks/sim_scale/proc_sample.h"
#include "benchmarks/sim_scale/sim_node.h"
#include "common/auth/secret.h"
#include "dslaunch/config.h"

namespace dslaunch::sim {
namespace {

// Beyond this many ranks the all-to-all (N^2 GETs) is skipped: at about 70k store operations a
// second on one launcher thread, 2,048 ranks already take about a minute.
constexpr int kDefaultAllToAllMax = 2048;
// How often a phase that has not finished reports how far it got.
constexpr std::chrono::seconds kProgressInterval{10};
constexpr std::chrono::seconds kTeardownProgressInterval{2};
// Descriptors the simulator needs besides one per connection.
constexpr uint64_t kSpareDescriptors = 64;

struct Options {
  std::string launcher;
  std::string worker;
  int ranks = 64;
  int ranks_per_node = 8;
  std::string mode = "direct";
  int alltoall_max = kDefaultAllToAllMax;
  int connect_window = 512;
  int phase_timeout_s = 600;
  std::string json;
  std::string work_dir;  // empty: a fresh directory under $TMPDIR, removed after a run that passed
};

struct PhaseResult {
  Phase phase;
  double wall_s = 0;
  double launcher_cpu_s = 0;
  double sim_cpu_s = 0;
  int64_t rss_kb = 0;
  double all_done_s = 0;  // teardown: every simulated agent had its RELEASE (the rest: the launcher's exit)
};

// Raises this process's soft descriptor limit to what `connections` need; false if the hard
// limit is too low.
bool RaiseDescriptors(uint64_t connections) {
  rlimit l{};
  ::getrlimit(RLIMIT_NOFILE, &l);
  const uint64_t want = connections + kSpareDescriptors;
  if (l.rlim_max < want) {
    std::cerr << "sim_scale: " << connections << " connections need " << want
              << " descriptors, but the hard limit is " << l.rlim_max << " (raise it: ulimit -n " << want
              << " as root)\n";
    return false;
  }
  l.rlim_cur = l.rlim_max;
  return ::setrlimit(RLIMIT_NOFILE, &l) == 0;
}

// A free loopback port for the launcher's endpoint.
uint16_t FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = *ParseIpv4("127.0.0.1", 0);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

class Simulation {
 public:
  explicit Simulation(const Options& o) : o_(o) {}

  int Run() {
    const int nodes = o_.ranks / o_.ranks_per_node;
    const bool direct = o_.mode == "direct";
    // Proxied, a node's store traffic rides its agent's connection.
    const uint64_t connections = static_cast<uint64_t>(nodes) * (direct ? o_.ranks_per_node + 1 : 1);
    if (!RaiseDescriptors(connections)) return 1;
    alltoall_ = o_.ranks <= o_.alltoall_max;
    const uint16_t port = FreePort();
    job_.loop = &loop_;
    job_.server = *ParseIpv4("127.0.0.1", port);
    job_.job_id = "sim-" + std::to_string(::getpid());
    job_.secret = GenerateSecret();
    job_.version = DSLAUNCH_VERSION;
    job_.proxied = !direct;
    job_.world_size = o_.ranks;
    job_.ranks_per_node = o_.ranks_per_node;
    job_.connect_window = o_.connect_window;

    LauncherSpec spec{o_.launcher, o_.worker, o_.work_dir, job_.job_id, job_.secret, port, nodes,
                      o_.ranks_per_node, alltoall_, !direct};
    auto launcher = LauncherProcess::Start(loop_, spec);
    if (!launcher.ok()) return Fail(launcher.status().ToString());
    launcher_ = std::move(*launcher);
    if (!loop_.RunUntil([&] { return launcher_->waiting() || launcher_->exited(); }, Deadline())) {
      return Fail("the launcher did not start its rendezvous");
    }
    if (launcher_->exited()) return Fail("the launcher exited at start:\n" + launcher_->tail());
    idle_ = SampleProcess(launcher_->pid());
    for (int i = 1; i < nodes; ++i) nodes_.push_back(std::make_unique<SimNode>(job_, i));

    const int64_t sim_nodes = nodes - 1, sim_ranks = sim_nodes * o_.ranks_per_node;
    if (!RunPhase(Phase::kJoin, sim_nodes, [](SimNode& n) { n.StartJoin(); })) return Failed();
    if (!RunPhase(Phase::kConnect, sim_ranks, [](SimNode& n) { n.StartConnect(); })) return Failed();
    if (!RunPhase(Phase::kBarrier, sim_ranks, [](SimNode& n) { n.StartBarrier(); })) return Failed();
    if (!RunPhase(Phase::kBroadcast, sim_ranks, [](SimNode& n) { n.StartBroadcast(); })) return Failed();
    if (alltoall_ && !RunPhase(Phase::kAllToAll, sim_ranks, [](SimNode& n) { n.StartAllToAll(); })) {
      return Failed();
    }
    peak_ = SampleProcess(launcher_->pid());
    if (!RunPhase(Phase::kTeardown, sim_nodes, [](SimNode& n) { n.StartTeardown(); })) return Failed();
    const int code = launcher_->Reap();
    if (code != 0) return Fail("the launcher exited with " + std::to_string(code) + ":\n" + launcher_->tail());
    Report();
    std::cout << "sim_scale: all " << o_.ranks << " ranks completed every phase"
              << (alltoall_ ? "" : " (all-to-all skipped above --alltoall_max)") << "\n";
    return 0;
  }

 private:
  Clock::time_point Deadline() const { return Clock::now() + std::chrono::seconds(o_.phase_timeout_s); }

  template <typename Fn>
  bool RunPhase(Phase p, int64_t expected, Fn start) {
    const int i = static_cast<int>(p);
    std::cerr << "sim_scale: " << PhaseName(p) << "..." << std::endl;
    const ProcSample before = SampleProcess(launcher_->pid());
    const double sim_before = OwnCpuSeconds();
    const auto t0 = Clock::now();
    for (auto& n : nodes_) start(*n);
    const bool teardown = p == Phase::kTeardown;
    std::optional<double> all_done_s;  // when every simulated participant was done
    auto done = [&] {
      if (!job_.errors.empty()) return true;
      if (!teardown && launcher_->exited()) {
        job_.errors.push_back(std::string("the launcher exited during ") + PhaseName(p));
        return true;
      }
      if (job_.done[i] < expected) return false;
      if (!all_done_s) all_done_s = std::chrono::duration<double>(Clock::now() - t0).count();
      return !teardown || launcher_->exited();
    };
    // A phase that takes long says how far it got, every kProgressInterval.
    auto progress = std::make_shared<std::function<void()>>();
    *progress = [&, progress, i, expected] {
      std::cerr << "sim_scale: " << PhaseName(p) << ": " << job_.done[i] << " of " << expected << " after "
                << std::chrono::duration<double>(Clock::now() - t0).count() << " s"
                << (launcher_->exited() ? " (the launcher has exited)" : "") << std::endl;
      if (teardown && all_done_s && !launcher_->exited()) {
        // Every simulated agent is released, and still the launcher runs: show what it waits for.
        const std::string ps = "ps -o pid,ppid,stat,etime,wchan:24,args --forest -g " +
                               std::to_string(launcher_->pid()) + " -s $(ps -o sid= -p " +
                               std::to_string(launcher_->pid()) + ") | cut -c1-200 >&2";
        if (std::system(ps.c_str()) != 0) std::cerr << "sim_scale: ps failed\n";
      }
      loop_.At(Clock::now() + (teardown ? kTeardownProgressInterval : kProgressInterval), *progress);
    };
    loop_.At(t0 + (teardown ? kTeardownProgressInterval : kProgressInterval), *progress);
    const bool in_time = loop_.RunUntil(done, Deadline()) && (!teardown || launcher_->exited());
    loop_.Cancel();
    PhaseResult r{p};
    r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
    const ProcSample after = SampleProcess(launcher_->pid());
    r.launcher_cpu_s = after.cpu_seconds - before.cpu_seconds;
    r.sim_cpu_s = OwnCpuSeconds() - sim_before;
    r.rss_kb = after.rss_kb;
    r.all_done_s = all_done_s.value_or(r.wall_s);
    results_.push_back(r);
    if (!job_.errors.empty()) return false;
    if (!in_time) {
      job_.errors.push_back(std::string(PhaseName(p)) + ": " + std::to_string(job_.done[i]) + " of " +
                            std::to_string(expected) + " completed within " + std::to_string(o_.phase_timeout_s) +
                            " s" + (launcher_->exited() ? "; the launcher exited" : ""));
      return false;
    }
    return true;
  }

  int Fail(const std::string& why) {
    std::cerr << "sim_scale: " << why << "\n";
    return 1;
  }

  int Failed() {
    std::string all;
    for (size_t i = 0; i < job_.errors.size() && i < 10; ++i) all += "\n  " + job_.errors[i];
    if (job_.errors.size() > 10) all += "\n  ... " + std::to_string(job_.errors.size() - 10) + " more";
    return Fail("failed:" + all + "\nlauncher's last output:\n" + launcher_->tail());
  }

  void Report();

  const Options& o_;
  SimLoop loop_;
  SimJob job_;
  std::unique_ptr<LauncherProcess> launcher_;
  std::vector<std::unique_ptr<SimNode>> nodes_;
  std::vector<PhaseResult> results_;
  ProcSample idle_, peak_;
  bool alltoall_ = false;
};

void Simulation::Report() {
  const double n = o_.ranks;
  char line[256];
  std::printf("%-10s %9s %14s %16s %12s %10s\n", "phase", "wall_s", "launcher_cpu_s", "launcher_us/rank",
              "sim_cpu_s", "rss_MB");
  std::string phases;
  for (const PhaseResult& r : results_) {
    std::printf("%-10s %9.3f %14.3f %16.1f %12.3f %10.1f\n", PhaseName(r.phase), r.wall_s, r.launcher_cpu_s,
                r.launcher_cpu_s / n * 1e6, r.sim_cpu_s, static_cast<double>(r.rss_kb) / 1024);
    if (r.phase == Phase::kTeardown) {
      std::printf("teardown: every simulated agent released after %.3f s, the launcher exited after %.3f s\n",
                  r.all_done_s, r.wall_s);
    }
    std::snprintf(line, sizeof(line),
                  "%s\"%s\":{\"wall_s\":%.4f,\"launcher_cpu_s\":%.4f,\"sim_cpu_s\":%.4f,\"all_done_s\":%.4f}",
                  phases.empty() ? "" : ",", PhaseName(r.phase), r.wall_s, r.launcher_cpu_s, r.sim_cpu_s, r.all_done_s);
    phases += line;
  }
  const int64_t grown_kb = std::max(peak_.hwm_kb, peak_.rss_kb) - idle_.rss_kb;
  std::printf("launcher memory: idle %.1f MB, peak %.1f MB: %.0f bytes per rank; %lld log lines; %lld connect retries\n",
              static_cast<double>(idle_.rss_kb) / 1024, static_cast<double>(peak_.hwm_kb) / 1024,
              static_cast<double>(grown_kb) * 1024 / n, static_cast<long long>(launcher_->lines()),
              static_cast<long long>(job_.connect_retries));
  if (o_.json.empty()) return;
  std::ofstream out(o_.json, std::ios::app);
  out << "{\"ranks\":" << o_.ranks << ",\"nodes\":" << o_.ranks / o_.ranks_per_node << ",\"mode\":\"" << o_.mode
      << "\",\"alltoall\":" << (alltoall_ ? "true" : "false") << ",\"idle_rss_kb\":" << idle_.rss_kb
      << ",\"peak_hwm_kb\":" << peak_.hwm_kb << ",\"bytes_per_rank\":" << static_cast<double>(grown_kb) * 1024 / n
      << ",\"log_lines\":" << launcher_->lines() << ",\"phases\":{" << phases << "}}\n";
}

}  // namespace
}  // namespace dslaunch::sim

int main(int argc, char** argv) {
  dslaunch::sim::Options o;
  CLI::App app{"Control plane at scale: simulated nodes against a real launcher on loopback"};
  app.add_option("--launcher", o.launcher, "the dslaunch binary")->required();
  app.add_option("--worker", o.worker, "the sim_scale_worker binary (node 0's real ranks)")->required();
  app.add_option("--ranks", o.ranks, "ranks in all, a multiple of --ranks_per_node, at least 2 nodes")->required();
  app.add_option("--ranks_per_node", o.ranks_per_node, "ranks per node");
  app.add_option("--mode", o.mode, "direct: a store connection per rank; proxied: one per node, combined requests")
      ->check(CLI::IsMember({"direct", "proxied"}));
  app.add_option("--alltoall_max", o.alltoall_max, "skip the all-to-all (N^2 reads) above this many ranks");
  app.add_option("--connect_window", o.connect_window, "connections in their handshake at most at once");
  app.add_option("--phase_timeout", o.phase_timeout_s, "seconds each phase may take");
  app.add_option("--json", o.json, "append the results as one JSON line to this file");
  app.add_option("--work_dir", o.work_dir, "where the secret file and the launcher's logs go (default: a temporary directory)");
  CLI11_PARSE(app, argc, argv);
  if (o.ranks_per_node < 1 || o.ranks % o.ranks_per_node != 0 || o.ranks / o.ranks_per_node < 2) {
    std::cerr << "sim_scale: --ranks " << o.ranks << " must be a multiple of --ranks_per_node " << o.ranks_per_node
              << " and make at least 2 nodes\n";
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);
  const bool own_dir = o.work_dir.empty();
  if (own_dir) {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/sim_scale.XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) {
      std::perror("sim_scale: mkdtemp");
      return 1;
    }
    o.work_dir = templ;
  }
  int code = 0;
  {
    dslaunch::sim::Simulation sim(o);
    code = sim.Run();
  }
  if (own_dir && code == 0) {
    std::filesystem::remove_all(o.work_dir);
  } else if (code != 0) {
    std::cerr << "sim_scale: the launcher's output and logs are in " << o.work_dir << "\n";
  }
  return code;
}
