// dslaunch inside real Slurm allocations (docs/slurm.md): munge, slurmctld and one slurmd per node
// of the namespaced test cluster (the `slurm` CTest fixture, scripts/slurm-cluster.sh). Agents are
// started as job steps by srun; salloc and sbatch are Slurm's own; signals come from scancel and
// scontrol requeue, as Slurm sends them at a time limit or on preemption.
#include <dirent.h>
#include <unistd.h>
#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "common/exit_codes.h"
#include "runtime/data/token_shard.h"
#include "tests/support/proc_checks.h"
#include "tests/support/skip.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kBin = DSLAUNCH_BIN_DIR;
const std::string kSource = DSLAUNCH_SOURCE_DIR;
const std::string kLauncher = kBin + "/dslaunch";
constexpr std::chrono::seconds kJobTimeout{120};
// How long the cluster may take to have every node idle again (a previous job's teardown, a node
// that was cut off by a cluster test and re-registers).
constexpr std::chrono::seconds kIdleTimeout{60};
// Slurm makes a requeued job wait 121 s before it is eligible again; the tests move its start
// time to now, as an administrator may.
constexpr std::chrono::seconds kRequeueTimeout{60};
// How long a requeued job may stay PENDING after StartTime=now before the update is sent again:
// the scheduler starts a job it may start within a few of its passes.
constexpr std::chrono::seconds kStartNowRetry{5};

// The Slurm test cluster: DSLAUNCH_SLURM_DIR with its slurm.conf, or nullptr.
struct Slurm {
  std::string conf;
  std::vector<std::string> Env() const { return {"SLURM_CONF=" + conf, "DSLAUNCH=" + kLauncher}; }
  // Runs argv (a Slurm command is looked up in PATH) with SLURM_CONF set.
  ProcessResult Run(std::vector<std::string> argv, std::chrono::milliseconds timeout = kJobTimeout) const {
    argv[0] = InPath(argv[0]);
    return RunProcess(argv, timeout, Env());
  }
  static std::string InPath(const std::string& name) {
    if (name.find('/') != std::string::npos) return name;
    const char* path = std::getenv("PATH");
    std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
    for (size_t start = 0; start <= dirs.size();) {
      size_t colon = dirs.find(':', start);
      if (colon == std::string::npos) colon = dirs.size();
      const std::string candidate = dirs.substr(start, colon - start) + "/" + name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
      start = colon + 1;
    }
    return name;
  }
  std::string Query(std::vector<std::string> argv) const { return Run(std::move(argv), std::chrono::seconds(10)).out; }
  bool AllIdle() const {
    std::string all = Query({"sinfo", "-h", "-N", "-o", "%t"});
    return !all.empty() && all.find_first_not_of("idle\n") == std::string::npos;
  }
  std::string JobState(const std::string& job) const {
    std::string s = Query({"squeue", "-h", "-j", job, "-o", "%T"});
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }
};

const Slurm* GetSlurm() {
  static const Slurm* slurm = [] () -> const Slurm* {
    const char* dir = std::getenv("DSLAUNCH_SLURM_DIR");
    if (dir == nullptr || !std::filesystem::exists(std::string(dir) + "/slurm.conf")) return nullptr;
    return new Slurm{std::string(dir) + "/slurm.conf"};
  }();
  return slurm;
}

const char kMissing[] =
    "no Slurm test cluster (it needs root, 'ip netns' and slurm-wlm; run through ctest -L slurm, whose fixture "
    "brings it up and sets DSLAUNCH_SLURM_DIR)";

// Every process whose environment names the job (workers: DSLAUNCH_JOB_ID) or whose argv does
// (agents: --job_id ID); the namespaces share this machine's PID space.
std::vector<pid_t> JobProcesses(const std::string& job_id) {
  std::vector<pid_t> found;
  DIR* d = ::opendir("/proc");
  while (d != nullptr) {
    dirent* e = ::readdir(d);
    if (e == nullptr) break;
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == ::getpid()) continue;
    const std::string base = std::string("/proc/") + e->d_name;
    std::string env = ReadWhole(base + "/environ"), cmd = ReadWhole(base + "/cmdline");
    if (Contains(env, std::string("DSLAUNCH_JOB_ID=") + job_id + '\0') ||
        Contains(cmd, std::string("--job_id") + '\0' + job_id + '\0')) {
      if (ProcessAlive(static_cast<pid_t>(pid))) found.push_back(static_cast<pid_t>(pid));
    }
  }
  if (d != nullptr) ::closedir(d);
  return found;
}

void CheckNothingLeft(const Slurm& s, const std::string& job_id) {
  // Processes may take a moment to be reaped after the step ends.
  bool clean = WaitFor([&] { return JobProcesses(job_id).empty(); }, std::chrono::seconds(10));
  CHECK_MESSAGE(clean, "processes of job " << job_id << " left: " << JobProcesses(job_id).size());
  CHECK_MESSAGE(WaitFor([&] { return s.AllIdle(); }, kIdleTimeout), s.Query({"sinfo", "-N"}));
}

// A small gpt on a synthetic token stream, save-on-stop checkpoints into DIR/ckpt.
void WriteTrainConfig(const TempDir& dir, int steps) {
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 20000; ++i) tokens.push_back(static_cast<uint16_t>((i * 7 + i / 13) % 32));
  REQUIRE(runtime::WriteTokenShard(dir.path() + "/tokens.bin", tokens).ok());
  std::ofstream(dir.path() + "/train.json") << R"({"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.003}},
    "zero_optimization": {"stage": 1}, "steps_per_print": 10, "seed": 5,
    "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 16, "vocab_size": 32},
    "data": {"train": "tokens.bin", "val": "tokens.bin"},
    "checkpoint": {"dir": "ckpt", "load": "auto", "save_on_stop": true},
    "train": {"steps": )" << steps << R"(, "eval_steps": 4}})";
}

// Submits `script` with `args`, running in `dir`, its output in DIR/out.txt; the job id.
std::string Submit(const Slurm& s, const TempDir& dir, const std::string& script, std::vector<std::string> args,
                   std::vector<std::string> sbatch_options = {}) {
  std::vector<std::string> argv = {"sbatch", "--parsable", "--chdir", dir.path(), "--output", dir.path() + "/out.txt"};
  argv.insert(argv.end(), sbatch_options.begin(), sbatch_options.end());
  argv.push_back(script);
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = s.Run(argv, std::chrono::seconds(10));
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  std::string id = r.out.substr(0, r.out.find_first_of(";\n"));
  REQUIRE(!id.empty());
  return id;
}

// A job id of its own for every run: log directories of earlier runs stay, and a job id is used once.
std::string UniqueJobId(const std::string& name) {
  return name + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000);
}

bool Gone(const Slurm& s, const std::string& job) { return s.JobState(job).empty(); }

// Cancels a submitted job when the test ends, however it ends (scancel of a finished job is a no-op).
class JobGuard {
 public:
  JobGuard(const Slurm& s, std::string id) : s_(s), id_(std::move(id)) {}
  ~JobGuard() {
    s_.Run({"scancel", id_}, std::chrono::seconds(10));
    WaitFor([&] { return Gone(s_, id_); }, kJobTimeout);
  }

 private:
  const Slurm& s_;
  std::string id_;
};

TEST_CASE("Inside salloc, dslaunch needs no hostfile: one agent per node started by srun, ranks meet") {
  const Slurm* s = GetSlurm();
  DSLAUNCH_SKIP_UNLESS(s != nullptr, "slurm", kMissing);
  REQUIRE_MESSAGE(WaitFor([&] { return s->AllIdle(); }, kIdleTimeout), s->Query({"sinfo", "-N", "-l"}));
  const std::string job = UniqueJobId("slurm-hello");
  auto r = s->Run({"salloc", "--nodes=2", "--quiet", kLauncher, "--job_id", job, "--nproc_per_node", "2",
                   "--no_python", kBin + "/rank-hello"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.out << r.err);
  CHECK(Contains(r.err, "dslaunch: launcher slurm (2 nodes of Slurm job "));
  CHECK(Contains(r.err, "2 worker(s) on the first, slots from --nproc_per_node"));
  for (int rank = 0; rank < 4; ++rank) {
    CAPTURE(rank);
    CHECK(Contains(r.out, "rank " + std::to_string(rank) + "/4"));
  }
  // Nodes are Slurm's names, here the nodes' addresses: two namespaces, two agents.
  CHECK(Contains(r.out, "[rank 0 172.30.77.10]"));
  CHECK(Contains(r.out, "[rank 2 172.30.77.11]"));
  CHECK(Contains(r.out, "met 4 ranks at the store barrier"));
  CheckNothingLeft(*s, job);
}

TEST_CASE("Node mode under Slurm: srun starts one dslaunch per node, node 0 hosts, every node exits with the job's code") {
  const Slurm* s = GetSlurm();
  DSLAUNCH_SKIP_UNLESS(s != nullptr, "slurm", kMissing);
  REQUIRE_MESSAGE(WaitFor([&] { return s->AllIdle(); }, kIdleTimeout), s->Query({"sinfo", "-N", "-l"}));
  TempDir dir;
  const std::string script = kSource + "/deploy/slurm/dslaunch-per-node.sbatch";
  // The deploy script as is, in an allocation of two nodes (sbatch would run it the same way).
  auto r = s->Run({"salloc", "--nodes=2", "--quiet", "bash", script, "--log_dir", dir.path() + "/logs",
                   "--nproc_per_node", "2", "--no_python", kBin + "/rank-hello"});
  REQUIRE_MESSAGE(r.exit_code == 0, r.out << r.err);
  CHECK(Contains(r.err, "dslaunch: rendezvous complete: 2 nodes, 4 workers"));
  CHECK(Contains(r.err, "dslaunch: joining the rendezvous of job slurm-"));
  CHECK(Contains(r.out, "[rank 0 "));
  CHECK(Contains(r.out, "met 4 ranks at the store barrier"));
  // A failing rank on the joined node: both nodes' dslaunch, and so srun, exit with its code.
  auto f = s->Run({"salloc", "--nodes=2", "--quiet", "bash", script, "--log_dir", dir.path() + "/logs2",
                   "--grace_period", "2", "--nproc_per_node", "2", "--no_python", "/bin/sh", "-c",
                   "if [ \"$RANK\" = 3 ]; then sleep 1; exit 7; fi; exec sleep 600"});
  CHECK_MESSAGE(f.exit_code == 7, f.out << f.err);
  CHECK(Contains(f.err, "rank 3 on host "));
  CHECK(WaitFor([&] { return s->AllIdle(); }, kIdleTimeout));
}

TEST_CASE("Inside salloc, a failing rank stops every node's workers and the job exits with its code") {
  const Slurm* s = GetSlurm();
  DSLAUNCH_SKIP_UNLESS(s != nullptr, "slurm", kMissing);
  REQUIRE_MESSAGE(WaitFor([&] { return s->AllIdle(); }, kIdleTimeout), s->Query({"sinfo", "-N", "-l"}));
  const std::string job = UniqueJobId("slurm-fail");
  auto r = s->Run({"salloc", "--nodes=2", "--quiet", kLauncher, "--job_id", job, "--nproc_per_node", "2",
                   "--grace_period", "2", "--no_python", "/bin/sh", "-c",
                   "if [ \"$RANK\" = 3 ]; then sleep 1; exit 7; fi; exec sleep 600"});
  CHECK_MESSAGE(r.exit_code == 7, r.out << r.err);
  CHECK(Contains(r.err, "rank 3 on host 172.30.77.11"));
  CHECK(Contains(r.err, "exit code 7"));
  CheckNothingLeft(*s, job);
}

// The pid of the agent of `node_rank` of job `job_id` (its argv), 0 if none.
pid_t AgentPid(const std::string& job_id, int node_rank) {
  const std::string tail = std::string("--job_id") + '\0' + job_id + '\0' + "--node_rank" + '\0' +
                           std::to_string(node_rank) + '\0';
  DIR* d = ::opendir("/proc");
  pid_t found = 0;
  while (d != nullptr && found == 0) {
    dirent* e = ::readdir(d);
    if (e == nullptr) break;
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    const std::string cmd = ReadWhole(std::string("/proc/") + e->d_name + "/cmdline");
    // argv[0] is the agent (srun's argv holds the same words after its own).
    const std::string argv0 = cmd.substr(0, cmd.find('\0'));
    if (argv0.ends_with("/dslaunch-agent") && cmd.ends_with(tail)) found = static_cast<pid_t>(pid);
  }
  if (d != nullptr) ::closedir(d);
  return found;
}

TEST_CASE("A frozen agent is lost, and its step is cancelled: nothing is left on its node") {
  const Slurm* s = GetSlurm();
  DSLAUNCH_SKIP_UNLESS(s != nullptr, "slurm", kMissing);
  REQUIRE_MESSAGE(WaitFor([&] { return s->AllIdle(); }, kIdleTimeout), s->Query({"sinfo", "-N", "-l"}));
  const std::string job = UniqueJobId("slurm-frozen");
  std::vector<std::string> env = s->Env();
  Subprocess p({Slurm::InPath("salloc"), "--nodes=2", "--quiet", kLauncher, "--job_id", job, "--heartbeat_timeout",
                "2", "--grace_period", "2", "--no_python", "/bin/sleep", "600"},
               env);
  pid_t agent = 0;
  // Rank 1 (node 1's worker) runs: its agent has registered and started it.
  auto rank1_running = [&] {
    for (pid_t pid : JobProcesses(job)) {
      const std::string env = ReadWhole("/proc/" + std::to_string(pid) + "/environ");
      if (Contains(env, std::string("\0RANK=1", 7) + '\0')) return true;
    }
    return false;
  };
  REQUIRE(WaitFor(rank1_running, std::chrono::seconds(30)));
  agent = AgentPid(job, 1);
  REQUIRE(agent != 0);
  REQUIRE(::kill(agent, SIGSTOP) == 0);
  // Lost after the heartbeat timeout; the launcher ends the agent's srun, which cancels the step,
  // and Slurm kills the stopped agent (its workers die with it).
  auto r = p.Wait(kJobTimeout);
  CHECK_MESSAGE(r.exit_code != 0, r.err);
  CHECK_MESSAGE(Contains(r.err, "lost the agent of node 1 on host 172.30.77.11"), r.out << r.err);
  CHECK(WaitFor([&] { return !ProcessAlive(agent); }, std::chrono::seconds(10)));
  CheckNothingLeft(*s, job);
}

TEST_CASE("Pre-flight runs through srun and names the nodes whose agent is missing") {
  const Slurm* s = GetSlurm();
  DSLAUNCH_SKIP_UNLESS(s != nullptr, "slurm", kMissing);
  REQUIRE_MESSAGE(WaitFor([&] { return s->AllIdle(); }, kIdleTimeout), s->Query({"sinfo", "-N", "-l"}));
  auto r = s->Run({"salloc", "--nodes=2", "--quiet", kLauncher, "--agent_path", "/nonexistent/dslaunch-agent",
                   "--no_python", "/bin/true"});
  CHECK(r.exit_code == kExitInfrastructure);  // docs/exit-codes.md
  CHECK(Contains(r.err, "pre-flight failed on 2 of 2 nodes; nothing was started"));
  CHECK(Contains(r.err, "node 1 (172.30.77.11): agent '/nonexistent/dslaunch-agent' not found"));
}

TEST_CASE("The sbatch example of docs/slurm.md trains the bundled runtime on two nodes") {
  const Slurm* s = GetSlurm();
  DSLAUNCH_SKIP_UNLESS(s != nullptr, "slurm", kMissing);
  REQUIRE_MESSAGE(WaitFor([&] { return s->AllIdle(); }, kIdleTimeout), s->Query({"sinfo", "-N", "-l"}));
  TempDir dir;
  WriteTrainConfig(dir, 30);
  const std::string job = UniqueJobId("slurm-sbatch");
  // What docs/slurm.md says to type, with this build's dslaunch and a small train.json.
  auto r = s->Run({"sbatch", "--wait", "--chdir", dir.path(), "--output", dir.path() + "/out.txt",
                   kSource + "/deploy/slurm/dslaunch.sbatch", "train.json", "--job_id", job});
  const std::string out = ReadWhole(dir.path() + "/out.txt");
  REQUIRE_MESSAGE(r.exit_code == 0, r.err << out);
  CHECK(Contains(out, "dslaunch: launcher slurm (2 nodes of Slurm job"));
  CHECK(Contains(out, "step 30 |"));
  CHECK(Contains(out, "last complete: ckpt/global_step30"));
  CheckNothingLeft(*s, job);
}

TEST_CASE("Slurm's SIGTERM to the job (scancel, as at the time limit) leaves a save-on-stop checkpoint") {
  const Slurm* s = GetSlurm();
  DSLAUNCH_SKIP_UNLESS(s != nullptr, "slurm", kMissing);
  REQUIRE_MESSAGE(WaitFor([&] { return s->AllIdle(); }, kIdleTimeout), s->Query({"sinfo", "-N", "-l"}));
  TempDir dir;
  WriteTrainConfig(dir, 1000000);
  const std::string job = UniqueJobId("slurm-sigterm");
  const std::string id = Submit(*s, dir, kSource + "/deploy/slurm/dslaunch.sbatch", {"train.json", "--job_id", job});
  JobGuard guard(*s, id);
  REQUIRE_MESSAGE(WaitFor([&] { return Contains(ReadWhole(dir.path() + "/out.txt"), "step 20 |"); }, kJobTimeout),
                  ReadWhole(dir.path() + "/out.txt"));
  // scancel sends SIGTERM to every process of the job on every node, and SIGKILL KillWait (30 s
  // in the test cluster) later: what a time limit or a preemption does.
  REQUIRE(s->Run({"scancel", id}, std::chrono::seconds(10)).exit_code == 0);
  REQUIRE(WaitFor([&] { return Gone(*s, id); }, kJobTimeout));
  const std::string out = ReadWhole(dir.path() + "/out.txt");
  CHECK_MESSAGE(Contains(out, "checkpoints: 1 saved, 0 failed; last complete: ckpt/global_step"), out);
  const std::string latest = ReadWhole(dir.path() + "/ckpt/latest");
  CHECK(latest.starts_with("global_step"));
  CHECK(std::filesystem::exists(dir.path() + "/ckpt/" + latest.substr(0, latest.find('\n')) + "/meta.json"));
  CheckNothingLeft(*s, job);
}

// The requeued job's start time moved to now (Slurm holds a requeued job for 121 s).
// Slurm holds a requeued job for about two minutes (its BeginTime). The job can show PENDING before
// that hold is set, and the hold then overrides an early StartTime=now (seen once in CI, on a
// loaded machine: the job never started within kJobTimeout); so ask again until it leaves PENDING.
void StartNow(const Slurm& s, const std::string& id) {
  REQUIRE(WaitFor([&] { return s.JobState(id) == "PENDING"; }, kRequeueTimeout));
  const auto deadline = std::chrono::steady_clock::now() + kRequeueTimeout;
  while (s.JobState(id) == "PENDING") {
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "job " << id << " still PENDING after StartTime=now");
    auto r = s.Run({"scontrol", "update", "jobid=" + id, "StartTime=now"}, std::chrono::seconds(10));
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto retry = std::chrono::steady_clock::now() + kStartNowRetry;
    while (std::chrono::steady_clock::now() < retry && s.JobState(id) == "PENDING") {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }
}

TEST_CASE("A requeued job starts at generation SLURM_RESTART_COUNT and resumes from its checkpoint") {
  const Slurm* s = GetSlurm();
  DSLAUNCH_SKIP_UNLESS(s != nullptr, "slurm", kMissing);
  REQUIRE_MESSAGE(WaitFor([&] { return s->AllIdle(); }, kIdleTimeout), s->Query({"sinfo", "-N", "-l"}));
  TempDir dir;
  WriteTrainConfig(dir, 1000000);
  const std::string id = Submit(*s, dir, kSource + "/deploy/slurm/dslaunch-requeue.sbatch",
                                {"train.json", "--log_dir", dir.path() + "/logs"});
  JobGuard guard(*s, id);
  auto out = [&] { return ReadWhole(dir.path() + "/out.txt"); };
  REQUIRE_MESSAGE(WaitFor([&] { return Contains(out(), "step 20 |"); }, kJobTimeout), out());
  // scontrol requeue: SIGTERM to the job (save-on-stop), then the job waits in the queue.
  REQUIRE(s->Run({"scontrol", "requeue", id}, std::chrono::seconds(10)).exit_code == 0);
  StartNow(*s, id);
  const std::string metrics = dir.path() + "/logs/" + id + "-1/metrics.jsonl";
  REQUIRE_MESSAGE(WaitFor([&] { return Contains(ReadWhole(metrics), "\"generation\":1"); }, kJobTimeout), out());
  CHECK(Contains(out(), "dslaunch-requeue: job " + id + ", attempt 1"));
  CHECK(Contains(out(), "restart: resumed from ckpt/global_step"));
  CHECK(Contains(ReadWhole(metrics), "\"reason\":\"requeued by Slurm (SLURM_RESTART_COUNT=1)\""));
  REQUIRE(s->Run({"scancel", id}, std::chrono::seconds(10)).exit_code == 0);
  REQUIRE(WaitFor([&] { return Gone(*s, id); }, kJobTimeout));
  CheckNothingLeft(*s, id + "-1");
}

TEST_CASE("SIGUSR1 to the batch script (--signal=B:USR1@90) checkpoints, exits 76 and requeues the job") {
  const Slurm* s = GetSlurm();
  DSLAUNCH_SKIP_UNLESS(s != nullptr, "slurm", kMissing);
  REQUIRE_MESSAGE(WaitFor([&] { return s->AllIdle(); }, kIdleTimeout), s->Query({"sinfo", "-N", "-l"}));
  TempDir dir;
  WriteTrainConfig(dir, 1000000);
  const std::string id = Submit(*s, dir, kSource + "/deploy/slurm/dslaunch-requeue.sbatch",
                                {"train.json", "--log_dir", dir.path() + "/logs"});
  JobGuard guard(*s, id);
  auto out = [&] { return ReadWhole(dir.path() + "/out.txt"); };
  REQUIRE_MESSAGE(WaitFor([&] { return Contains(out(), "step 20 |"); }, kJobTimeout), out());
  // What Slurm sends 90 s before the time limit with --signal=B:USR1@90.
  REQUIRE(s->Run({"scancel", "--batch", "--signal=USR1", id}, std::chrono::seconds(10)).exit_code == 0);
  REQUIRE_MESSAGE(WaitFor([&] { return Contains(out(), "requeueing job " + id); }, kJobTimeout), out());
  CHECK(Contains(out(), "(exit 76)"));
  CHECK(Contains(out(), "last complete: ckpt/global_step"));
  StartNow(*s, id);
  REQUIRE_MESSAGE(WaitFor([&] { return Contains(out(), "restart: resumed from ckpt/global_step"); }, kJobTimeout),
                  out());
  REQUIRE(s->Run({"scancel", id}, std::chrono::seconds(10)).exit_code == 0);
  REQUIRE(WaitFor([&] { return Gone(*s, id); }, kJobTimeout));
  CheckNothingLeft(*s, id + "-1");
}

}  // namespace
}  // namespace dslaunch::testing
