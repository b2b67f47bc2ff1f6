// Fencing a lost node (docs/elastic.md, "Fencing a lost node"), with the real dslaunch-agent
// against scripted launchers (real endpoints on 127.0.0.1): an agent that loses the launcher
// stops its workers within the failure grace, and an agent told which agent held its node's place
// before kills that agent and its recorded workers before it starts its own. Also the fence
// itself (agent/node/node_fence.h) on real processes: it never signals a process the record does not
// name with its start time.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>

#include "agent/node/node_fence.h"
#include "agent/node/secret_dir.h"
#include "common/control_messages.h"
#include "common/process_tree.h"
#include "tests/support/scripted_launcher.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kAgent = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch-agent";
// Far longer than the failure grace (1 s): a worker that outlives the failure grace is still
// there when the test looks, however loaded the machine.
constexpr int64_t kLongGraceMs = 30000;
// How long a test waits for a state: far above what it takes (about a second), below kLongGraceMs.
constexpr auto kStateDeadline = std::chrono::seconds(15);

control::Assignment OneBashWorker(const TempDir& dir, int generation, const std::string& script) {
  control::Assignment a;
  a.generation = generation;
  a.log_dir = dir.path() + "/logs/" + kTestJobId;
  a.grace_period_ms = kLongGraceMs;
  a.tee = false;
  a.restartable = true;
  a.workers.push_back({0, 0, {"/bin/bash", "-c", script}, {}});
  return a;
}

// The agent, under a shell that passes it the secret (its pid is its REGISTER's), runtime dir `dir`.
std::unique_ptr<Subprocess> StartAgent(const TempDir& dir, const ScriptedLauncher& launcher) {
  return std::make_unique<Subprocess>(
      std::vector<std::string>{"/bin/sh", "-c",
                               std::string("echo ") + kTestSecret + " | exec " + kAgent + " --endpoint " +
                                   launcher.address() + " --job_id " + kTestJobId + " --node_rank 0"},
      std::vector<std::string>{"TMPDIR=" + dir.path()});
}

pid_t ReadPid(const std::string& path) {
  pid_t pid = 0;
  std::ifstream(path) >> pid;
  return pid;
}

// Whether an agent's fence record under `runtime_dir` (agent/node/fence_record.h) names a worker:
// the agent writes it after the worker has started, so a worker's own pid file can come first.
bool FenceRecordNamesAWorker(const std::string& runtime_dir) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(runtime_dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename() != agent::kFenceRecordFile) continue;
    std::ifstream in(it->path());
    for (std::string line; std::getline(in, line);) {
      if (line.starts_with("worker ")) return true;
    }
  }
  return false;
}

// A worker that ignores SIGTERM (as one stuck in a collective or a slow save may) and writes its
// pid once it runs.
std::string StubbornWorker(const std::string& pid_file) {
  return "trap '' TERM; echo $$ > " + pid_file + ".tmp && mv " + pid_file + ".tmp " + pid_file + "; exec sleep 120";
}

TEST_CASE("An agent that loses the launcher kills its workers within the failure grace, not the job's grace period") {
  TempDir dir;
  const std::string pid_file = dir.path() + "/worker.pid";
  ScriptedLauncher launcher(OneBashWorker(dir, 0, StubbornWorker(pid_file)));
  auto agent = StartAgent(dir, launcher);
  // The launcher is lost once the worker runs with SIGTERM ignored (closing at WORKER_STARTED
  // could stop it before its trap is set).
  REQUIRE(WaitFor([&] { return ReadPid(pid_file) > 0; }, kStateDeadline));
  const pid_t worker = ReadPid(pid_file);
  launcher.CloseAgentConnection();
  // SIGTERM is ignored, so only the SIGKILL at the end of the grace ends it: kFailureStopGrace
  // (1 s) after the loss, where the job's grace period would keep it 30 s.
  CHECK(WaitFor([&] { return !ProcessAlive(worker); }, kStateDeadline));
  ProcessResult r = agent->Wait(kStateDeadline);
  INFO(r.err);
  CHECK(r.exit_code == 2);  // kAgentLostLauncher
  CHECK(r.err.find("dslaunch-agent[node 0]: lost the connection to the launcher (End of file), stopping workers\n") !=
        std::string::npos);
  if (ProcessAlive(worker)) ::kill(worker, SIGKILL);
}

TEST_CASE("A re-admitted node's agent kills the agent that held the place before and its recorded workers, then starts its own") {
  TempDir dir;
  const std::string old_pid_file = dir.path() + "/old.pid";
  // Generation 0's agent and worker; then the node freezes (both stopped: neither can act).
  ScriptedLauncher first(OneBashWorker(dir, 0, StubbornWorker(old_pid_file)));
  auto old_agent = StartAgent(dir, first);
  REQUIRE(WaitFor([&] { return ReadPid(old_pid_file) > 0; }, kStateDeadline));
  // Frozen only once its record names the worker: a node frozen before that has nothing to fence.
  REQUIRE(WaitFor([&] { return FenceRecordNamesAWorker(dir.path()); }, kStateDeadline));
  const pid_t old_worker = ReadPid(old_pid_file);
  const pid_t old_agent_pid = first.agent_pid();
  REQUIRE(old_agent_pid > 0);
  REQUIRE(::kill(old_agent_pid, SIGSTOP) == 0);
  REQUIRE(::kill(old_worker, SIGSTOP) == 0);

  // Generation 2's agent on the same node, told which agent held the place. Its worker writes what
  // it finds at the old pids when it starts: a state letter, or "gone".
  const std::string seen_file = dir.path() + "/seen";
  // A zombie holds nothing (whoever reaps the orphan may not have yet): "gone" too.
  const std::string state_of =
      "s() { st=$(cut -d' ' -f3 /proc/$1/stat 2>/dev/null); [ \"$st\" = Z ] && st=; echo ${st:-gone}; }; ";
  control::Assignment next = OneBashWorker(
      dir, 2,
      state_of + "echo \"worker $(s " + std::to_string(old_worker) + ") agent $(s " + std::to_string(old_agent_pid) +
          ")\" > " + seen_file);
  next.restartable = false;
  next.fence_agent_pid = old_agent_pid;
  ScriptedLauncher second(next);
  auto new_agent = StartAgent(dir, second);
  ProcessResult r = new_agent->Wait(kStateDeadline);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  std::string seen;
  std::getline(std::ifstream(seen_file), seen);
  CHECK(seen == "worker gone agent gone");
  CHECK(r.err.find("dslaunch-agent[node 0]: fenced the node: killed the agent (pid " + std::to_string(old_agent_pid) +
                   ") and 1 worker (rank 0 of generation 0, process group " + std::to_string(old_worker) +
                   ") of the agent that held this node's place before; they are gone\n") != std::string::npos);
  ProcessResult old = old_agent->Wait(kStateDeadline);
  CHECK(old.exit_code == 128 + SIGKILL);  // the shell reports its agent's death
  if (ProcessAlive(old_worker)) ::kill(old_worker, SIGKILL);
}

// A record in the layout an agent leaves (agent/node/secret_dir.h, agent/node/fence_record.h), written by
// hand: the fence must act on exactly what it names.
std::string WriteRecord(const TempDir& dir, pid_t agent_pid, const agent::FenceRecord& record) {
  const std::string d = dir.path() + "/" + agent::SecretDirName(kTestJobId, 1, agent_pid);
  std::filesystem::create_directory(d);
  std::ofstream(d + "/" + agent::kPidNamespaceFile) << agent::OwnPidNamespace() << "\n";
  REQUIRE(agent::WriteFenceRecord(d, record).ok());
  return d;
}

TEST_CASE("The fence never signals a process whose pid the record names with another start time") {
  TempDir dir;
  // Stands for both a recorded agent and a recorded worker whose pids were recycled: the same pid,
  // a different start time.
  Subprocess bystander({"/bin/sleep", "60"});
  auto entry = ReadProcessEntry(bystander.pid());
  REQUIRE(entry.has_value());
  agent::FenceRecord record;
  record.agent = {bystander.pid(), entry->start_time + 1};
  record.workers.push_back({0, 0, {bystander.pid(), entry->start_time + 1}});
  WriteRecord(dir, bystander.pid(), record);
  auto report = agent::FenceEarlierAgent(dir.path(), kTestJobId, bystander.pid(), agent::OwnPidNamespace());
  REQUIRE_MESSAGE(report.ok(), report.status().ToString());
  CHECK(report->found_record);
  CHECK_FALSE(report->agent_killed);
  CHECK(report->killed.empty());
  CHECK(ProcessAlive(bystander.pid()));
  CHECK(agent::DescribeFence(*report, bystander.pid()) ==
        "nothing of the agent (pid " + std::to_string(bystander.pid()) +
            ") that held this node's place before is alive");

  // Another job's record, or one made in another PID namespace, is not looked at at all.
  auto other_job = agent::FenceEarlierAgent(dir.path(), "other-job", bystander.pid(), agent::OwnPidNamespace());
  REQUIRE(other_job.ok());
  CHECK_FALSE(other_job->found_record);
  auto other_ns = agent::FenceEarlierAgent(dir.path(), kTestJobId, bystander.pid(), "pid:[1]");
  REQUIRE(other_ns.ok());
  CHECK_FALSE(other_ns->found_record);
}

TEST_CASE("The fence kills a recorded group whose leader is gone but a member lives, and waits until it is gone") {
  TempDir dir;
  // A process group whose leader exits at once, leaving a member (a worker's child) behind.
  const std::string member_file = dir.path() + "/member.pid";
  Subprocess group({"/usr/bin/setsid", "/bin/bash", "-c",
                    "sleep 120 & echo $! > " + member_file + ".tmp && mv " + member_file + ".tmp " + member_file +
                        "; echo $$ > " + dir.path() + "/leader.pid; kill -STOP $$"});
  REQUIRE(WaitFor([&] { return ReadPid(member_file) > 0 && ReadPid(dir.path() + "/leader.pid") > 0; }, kStateDeadline));
  const pid_t leader = ReadPid(dir.path() + "/leader.pid");
  const pid_t member = ReadPid(member_file);
  auto leader_entry = ReadProcessEntry(leader);
  REQUIRE(leader_entry.has_value());
  REQUIRE(leader_entry->group == leader);
  agent::FenceRecord record;
  record.agent = {999999, 1};  // an agent long gone
  record.workers.push_back({1, 3, {leader, leader_entry->start_time}});
  ::kill(leader, SIGKILL);
  REQUIRE(WaitFor([&] { return !ProcessAlive(leader); }, kStateDeadline));
  REQUIRE(ProcessAlive(member));
  WriteRecord(dir, 999999, record);
  auto report = agent::FenceEarlierAgent(dir.path(), kTestJobId, 999999, agent::OwnPidNamespace());
  REQUIRE_MESSAGE(report.ok(), report.status().ToString());
  CHECK_FALSE(report->agent_killed);
  REQUIRE(report->killed.size() == 1);
  CHECK(report->killed[0].rank == 3);
  CHECK_FALSE(ProcessAlive(member));
}

}  // namespace
}  // namespace dslaunch::testing
