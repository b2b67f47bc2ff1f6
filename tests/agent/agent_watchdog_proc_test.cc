// The real dslaunch-agent against a scripted launcher (a real endpoint on 127.0.0.1 that answers
// REGISTER with a given ASSIGNMENT and records what the agent sends): the watchdog's messages and
// fields that the launcher does not act on yet (docs/elastic.md, "Hang detection and progress
// reports"): the assignment's watchdog timeout, WORKER_STALLED, WORKER_EXITED.last_step.
#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <mutex>

#include "common/control_messages.h"
#include "tests/support/scripted_launcher.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kAgent = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch-agent";
// Hang guard for one agent run; the jobs take a few seconds.
constexpr std::chrono::seconds kRunTimeout{60};

control::Assignment BashWorkers(const TempDir& dir, const std::vector<std::string>& scripts,
                                int64_t watchdog_timeout_ms) {
  control::Assignment a;
  a.log_dir = dir.path() + "/logs/" + kTestJobId;
  a.grace_period_ms = 1000;
  a.tee = false;
  a.watchdog_timeout_ms = watchdog_timeout_ms;
  for (size_t i = 0; i < scripts.size(); ++i) {
    const int rank = static_cast<int>(i);
    a.workers.push_back({rank, rank, {"/bin/bash", "-c", scripts[i]}, {}});
  }
  return a;
}

// Runs the agent to its end; returns its result.
ProcessResult RunAgent(const TempDir& dir, const ScriptedLauncher& launcher) {
  // The secret is the first line of the agent's stdin.
  return RunProcess({"/bin/sh", "-c",
                     std::string("echo ") + kTestSecret + " | exec " + kAgent + " --endpoint " + launcher.address() +
                         " --job_id " + kTestJobId + " --node_rank 0"},
                    kRunTimeout, {"TMPDIR=" + dir.path()});
}

template <typename T>
std::vector<T> All(const std::vector<control::Message>& messages) {
  std::vector<T> out;
  for (const auto& m : messages) {
    if (const auto* t = std::get_if<T>(&m)) out.push_back(*t);
  }
  return out;
}

// The index of the first message of type T for `rank`, or -1.
template <typename T>
int IndexOf(const std::vector<control::Message>& messages, int rank) {
  for (size_t i = 0; i < messages.size(); ++i) {
    if (const auto* t = std::get_if<T>(&messages[i]); t != nullptr && t->rank == rank) return static_cast<int>(i);
  }
  return -1;
}

TEST_CASE("The agent applies the assignment's watchdog timeout and reports the stall, then the exit") {
  TempDir dir;
  ScriptedLauncher launcher(BashWorkers(dir,
                                        {
                                            // Reports step 7, then hangs: stalled after 1 s.
                                            "echo 7 > \"$DSLAUNCH_PROGRESS_FILE\"; sleep 30",
                                            // Turns the watchdog off for itself, then is silent.
                                            "echo '0 timeout=0' > \"$DSLAUNCH_PROGRESS_FILE\"; sleep 2.5",
                                        },
                                        /*watchdog_timeout_ms=*/1000));
  auto r = RunAgent(dir, launcher);
  INFO(r.err);
  CHECK(r.exit_code == 1);  // kAgentWorkersFailed
  const auto messages = launcher.Received();
  const auto stalls = All<control::WorkerStalled>(messages);
  REQUIRE(stalls.size() == 1);
  CHECK(stalls[0].rank == 0);
  CHECK(stalls[0].last_step == 7);
  CHECK(stalls[0].timeout_ms == 1000);
  CHECK(stalls[0].silence_ms > 1000);
  CHECK(IndexOf<control::WorkerStalled>(messages, 0) < IndexOf<control::WorkerExited>(messages, 0));
  auto exits = All<control::WorkerExited>(messages);
  REQUIRE(exits.size() == 2);
  std::sort(exits.begin(), exits.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  CHECK(exits[0].status == ExitStatus::Signaled(SIGKILL));
  CHECK_FALSE(exits[0].stopped);
  CHECK(exits[0].last_step == 7);
  CHECK(exits[1].status.success());
  CHECK(exits[1].last_step == 0);
  CHECK(r.err.find("rank 0 reported no progress for ") != std::string::npos);
}

TEST_CASE("WORKER_EXITED carries the step written just before the exit, and -1 for a rank that wrote none") {
  TempDir dir;
  ScriptedLauncher launcher(BashWorkers(dir,
                                        {
                                            "echo 5 > \"$DSLAUNCH_PROGRESS_FILE\"; echo 6 > \"$DSLAUNCH_PROGRESS_FILE\"",
                                            "exit 0",
                                        },
                                        /*watchdog_timeout_ms=*/0));
  auto r = RunAgent(dir, launcher);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  auto exits = All<control::WorkerExited>(launcher.Received());
  REQUIRE(exits.size() == 2);
  std::sort(exits.begin(), exits.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  CHECK(exits[0].last_step == 6);
  CHECK(exits[1].last_step == -1);
  CHECK(All<control::WorkerStalled>(launcher.Received()).empty());
}

TEST_CASE("The agent forwards each report with a step or figures as WORKER_PROGRESS, one per poll at most") {
  TempDir dir;
  ScriptedLauncher launcher(
      BashWorkers(dir,
                  {
                      // Two reports 1.5 s apart (several polls, also on a loaded machine): both
                      // seen; then a malformed one, not forwarded.
                      "echo '3 step_ms=12.5 loss=2.25' > \"$DSLAUNCH_PROGRESS_FILE\"; sleep 1.5; "
                      "echo '4 timeout=60 val_loss=1.5 val_step=4' > \"$DSLAUNCH_PROGRESS_FILE\"; sleep 1.5; "
                      "echo '5 loss=nan' > \"$DSLAUNCH_PROGRESS_FILE\"; sleep 0.6",
                      // Only an old-style report.
                      "echo '9 timeout=30' > \"$DSLAUNCH_PROGRESS_FILE\"; sleep 0.6",
                  },
                  /*watchdog_timeout_ms=*/0));
  auto r = RunAgent(dir, launcher);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  const auto progress = All<control::WorkerProgress>(launcher.Received());
  std::vector<control::WorkerProgress> rank0, rank1;
  for (const auto& p : progress) (p.rank == 0 ? rank0 : rank1).push_back(p);
  REQUIRE(rank0.size() == 2);
  CHECK(rank0[0].step == 3);
  CHECK(rank0[0].figures.step_ms == 12.5);
  CHECK(rank0[0].figures.loss == 2.25);
  CHECK(rank0[1].step == 4);
  CHECK(rank0[1].figures.val_loss == 1.5);
  CHECK(rank0[1].figures.val_step == 4);
  CHECK_FALSE(rank0[1].figures.loss);
  REQUIRE(rank1.size() == 1);
  CHECK(rank1[0].step == 9);
  CHECK(rank1[0].figures.empty());
  CHECK(r.err.find("loss 'nan' is not a finite number") != std::string::npos);
}

}  // namespace
}  // namespace dslaunch::testing
