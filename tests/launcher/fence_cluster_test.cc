// Cluster tests of fencing a lost node (docs/elastic.md, "Fencing a lost node"): a node is cut
// off (`ip link set ... down`) for longer than the heartbeat timeout, comes back while its stale
// worker would still have run before issue 25, and is re-admitted. A sampler watches that node's
// processes every 50 ms (the namespaces share this machine's PID space; a process belongs to a
// node by its network namespace) and the tests check that at no instant workers of two
// generations run there.
#include <dirent.h>
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "tests/support/cluster.h"
#include "tests/support/proc_checks.h"
#include "tests/support/skip.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

using Clock = std::chrono::steady_clock;

const std::string kBin = DSLAUNCH_BIN_DIR;
const std::string kLauncher = kBin + "/dslaunch";
const std::string kAgent = kBin + "/dslaunch-agent";
const std::string kEnvCheck = kBin + "/env_check";
constexpr std::chrono::seconds kRunTimeout{150};
constexpr auto kSampleInterval = std::chrono::milliseconds(50);
// The scenario of issue 25: a 3 s heartbeat timeout, a 30 s grace period (a save-on-stop that
// cannot finish), the node cut off for 8 s: back well inside the 33 s its worker lived before.
constexpr int kHeartbeatTimeoutS = 3;
constexpr int kGracePeriodS = 30;
constexpr auto kCutFor = std::chrono::seconds(8);
// After the cut, the agent misses heartbeats for the timeout (checked once a second), then gives
// its workers the failure grace (1 s); this much more covers a loaded 2-core machine.
constexpr auto kGoneMargin = std::chrono::seconds(3);
constexpr int kNode = 2;  // the node cut off (ranks 4 and 5)

// The job: three nodes of which two suffice, generation 0 hangs with SIGTERM ignored (a rank
// stuck in a collective), generation 1 (two nodes) hangs until the node is back and stops at
// once, generation 2 (three nodes again) ends after a second (long enough to be sampled).
std::vector<std::string> Launch(const Cluster& c, const TempDir& dir, const std::string& job_id) {
  std::vector<std::string> argv = {kLauncher, "--log_dir", dir.path() + "/logs", "--grace_period",
                                   std::to_string(kGracePeriodS), "--heartbeat_timeout",
                                   std::to_string(kHeartbeatTimeoutS), "--job_id", job_id, "--num_nodes", "3",
                                   "--nnodes", "2:3", "--max_restarts", "2"};
  for (auto& o : c.SshOptions()) argv.push_back(o);
  argv.insert(argv.end(), {"--no_python", kEnvCheck, "--pid_dir", dir.path(), "--hang", "--until_generation", "2",
                           "--ignore_sigterm_generation", "0", "--linger_ms", "1000"});
  return argv;
}

// The value of NAME in a /proc/PID/environ (entries separated by NUL bytes), or nullopt.
std::optional<std::string> EnvValue(const std::string& environ, const std::string& name) {
  for (size_t i = 0; i < environ.size();) {
    size_t end = environ.find('\0', i);
    if (end == std::string::npos) end = environ.size();
    if (environ.compare(i, name.size() + 1, name + "=") == 0) return environ.substr(i + name.size() + 1, end - i - name.size() - 1);
    i = end + 1;
  }
  return std::nullopt;
}

// One look at a node's processes of the job.
struct Sample {
  Clock::time_point at;
  std::map<int, std::vector<pid_t>> workers;  // by generation (DSLAUNCH_RESTART_COUNT)
  std::vector<pid_t> agents;
};

// Samples the job's live (not zombie) workers and agents in one node's network namespace, every
// kSampleInterval, on a thread of its own, until Stop().
class NodeSampler {
 public:
  NodeSampler(const std::string& netns, std::string job_id) : job_id_(std::move(job_id)) {
    struct stat st {};
    if (::stat(("/run/netns/" + netns).c_str(), &st) == 0) net_ = "net:[" + std::to_string(st.st_ino) + "]";
    thread_ = std::thread([this] {
      while (!stop_) {
        Sample s = Look();
        {
          std::lock_guard lock(mu_);
          samples_.push_back(std::move(s));
        }
        std::this_thread::sleep_for(kSampleInterval);
      }
    });
  }
  ~NodeSampler() { Stop(); }

  bool found_namespace() const { return !net_.empty(); }

  std::vector<Sample> Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    std::lock_guard lock(mu_);
    return samples_;
  }
  Sample Latest() {
    std::lock_guard lock(mu_);
    return samples_.empty() ? Sample{} : samples_.back();
  }

 private:
  Sample Look() const {
    Sample s;
    s.at = Clock::now();
    DIR* d = ::opendir("/proc");
    if (d == nullptr) return s;
    while (dirent* e = ::readdir(d)) {
      char* end = nullptr;
      const long pid = std::strtol(e->d_name, &end, 10);
      if (*end != '\0' || pid <= 0) continue;
      const std::string base = std::string("/proc/") + e->d_name;
      std::error_code ec;
      if (std::filesystem::read_symlink(base + "/ns/net", ec).string() != net_ || ec) continue;
      const std::string stat = ReadWhole(base + "/stat");
      const size_t close = stat.rfind(')');
      if (close == std::string::npos || stat.size() < close + 3 || stat[close + 2] == 'Z') continue;
      const std::string cmdline = ReadWhole(base + "/cmdline");
      const std::string program = cmdline.substr(0, cmdline.find('\0'));
      if (program == kAgent && Contains(cmdline, std::string("\0", 1) + job_id_ + std::string("\0", 1))) {
        s.agents.push_back(static_cast<pid_t>(pid));
      } else if (program == kEnvCheck) {
        const std::string environ = ReadWhole(base + "/environ");
        auto gen = EnvValue(environ, "DSLAUNCH_RESTART_COUNT");
        if (EnvValue(environ, "DSLAUNCH_JOB_ID") != job_id_ || !gen) continue;
        s.workers[std::atoi(gen->c_str())].push_back(static_cast<pid_t>(pid));
      }
    }
    ::closedir(d);
    return s;
  }

  std::string job_id_;
  std::string net_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<Sample> samples_;
  std::thread thread_;
};

std::string Seconds(Clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f s", std::chrono::duration<double>(d).count());
  return buf;
}

// What the samples say about the node, relative to the cut.
struct Findings {
  std::string overlap;  // the first sample with workers of two generations, described; empty: none
  std::optional<Clock::duration> old_workers_last_seen;  // generation 0's workers, after the cut
  std::optional<Clock::duration> old_agents_last_seen;   // the agents that ran before the cut
  std::optional<Clock::duration> new_workers_first_seen;  // generation 2's
};

Findings Examine(const std::vector<Sample>& samples, Clock::time_point cut) {
  Findings f;
  std::set<pid_t> old_agents;
  for (const Sample& s : samples) {
    if (s.at < cut) old_agents.insert(s.agents.begin(), s.agents.end());
  }
  for (const Sample& s : samples) {
    if (s.workers.size() > 1 && f.overlap.empty()) {
      f.overlap = Seconds(s.at - cut) + " after the cut:";
      for (const auto& [gen, pids] : s.workers) f.overlap += " generation " + std::to_string(gen) + " (" + std::to_string(pids.size()) + ")";
    }
    if (s.at < cut) continue;
    if (s.workers.count(0)) f.old_workers_last_seen = s.at - cut;
    for (pid_t a : s.agents) {
      if (old_agents.count(a)) f.old_agents_last_seen = s.at - cut;
    }
    if (s.workers.count(2) && !f.new_workers_first_seen) f.new_workers_first_seen = s.at - cut;
  }
  return f;
}

TEST_CASE("A node cut off and back inside the old window never runs two generations' workers, and its stale ones are gone within heartbeat timeout + failure grace") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  const std::string job = "fence-cut";
  NodeSampler sampler("dsln" + std::to_string(kNode), job);
  REQUIRE(sampler.found_namespace());
  Subprocess launcher(Launch(*c, dir, job));
  REQUIRE(WaitFor([&] { return sampler.Latest().workers[0].size() == 2 && !sampler.Latest().agents.empty(); },
                  std::chrono::seconds(60)));
  Clock::time_point cut;
  {
    LinkGuard guard(*c, kNode);
    REQUIRE(SetLink(*c, kNode, false));
    cut = Clock::now();
    std::this_thread::sleep_for(kCutFor);  // the scenario: how long the node is away
  }  // link back up
  auto r = launcher.Wait(kRunTimeout);
  const Findings f = Examine(sampler.Stop(), cut);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.err, "dslaunch: generation 0: node " + c->Addr(kNode) + " lost (no heartbeat for "));
  CHECK(Contains(r.out, "[rank 5 " + c->Addr(kNode) + "] rank 5 of 6: generation 2 ok\n"));
  CHECK_MESSAGE(f.overlap.empty(), "two generations' workers at once on node ", kNode, ": ", f.overlap);
  REQUIRE(f.old_workers_last_seen.has_value());
  REQUIRE(f.old_agents_last_seen.has_value());
  REQUIRE(f.new_workers_first_seen.has_value());
  MESSAGE("after the cut: generation 0's workers last seen ", Seconds(*f.old_workers_last_seen), ", their agent ",
          Seconds(*f.old_agents_last_seen), ", generation 2's workers first seen ", Seconds(*f.new_workers_first_seen));
  const auto bound = std::chrono::seconds(kHeartbeatTimeoutS) + std::chrono::seconds(1) + kGoneMargin;
  CHECK(*f.old_workers_last_seen < bound);
  CHECK(*f.old_agents_last_seen < bound);
}

TEST_CASE("A frozen node's agent and workers are killed by its next agent before generation 2's workers start there") {
  Cluster* c = Cluster::Get();
  DSLAUNCH_SKIP_UNLESS(c != nullptr, "cluster", Cluster::Missing());
  TempDir dir;
  const std::string job = "fence-frozen";
  NodeSampler sampler("dsln" + std::to_string(kNode), job);
  REQUIRE(sampler.found_namespace());
  Subprocess launcher(Launch(*c, dir, job));
  REQUIRE(WaitFor([&] { return sampler.Latest().workers[0].size() == 2 && sampler.Latest().agents.size() == 1; },
                  std::chrono::seconds(60)));
  // The node hangs (a frozen VM, a kernel stuck in a driver): its agent and workers stop running,
  // so nothing on the node can notice the loss of the launcher, and then its network goes.
  const Sample before = sampler.Latest();
  const pid_t old_agent = before.agents[0];
  REQUIRE(::kill(old_agent, SIGSTOP) == 0);
  for (pid_t w : before.workers.at(0)) REQUIRE(::kill(w, SIGSTOP) == 0);
  Clock::time_point cut;
  {
    LinkGuard guard(*c, kNode);
    REQUIRE(SetLink(*c, kNode, false));
    cut = Clock::now();
    std::this_thread::sleep_for(kCutFor);
  }
  auto r = launcher.Wait(kRunTimeout);
  const Findings f = Examine(sampler.Stop(), cut);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.out, "[rank 5 " + c->Addr(kNode) + "] rank 5 of 6: generation 2 ok\n"));
  CHECK_MESSAGE(f.overlap.empty(), "two generations' workers at once on node ", kNode, ": ", f.overlap);
  REQUIRE(f.old_workers_last_seen.has_value());
  REQUIRE(f.new_workers_first_seen.has_value());
  MESSAGE("after the cut: the frozen generation 0 workers last seen ", Seconds(*f.old_workers_last_seen),
          ", generation 2's workers first seen ", Seconds(*f.new_workers_first_seen));
  CHECK(*f.old_workers_last_seen < *f.new_workers_first_seen);
  CHECK(Contains(r.err, "fenced the node: killed "));
  CHECK(Contains(r.err, "of the agent that held this node's place before; they are gone"));
  std::vector<pid_t> frozen = before.workers.at(0);
  frozen.push_back(old_agent);
  for (pid_t p : frozen) {
    CHECK_FALSE(ProcessAlive(p));
    if (ProcessAlive(p)) ::kill(p, SIGKILL);  // a failed fence leaves them stopped: not for the next test
  }
}

}  // namespace
}  // namespace dslaunch::testing
