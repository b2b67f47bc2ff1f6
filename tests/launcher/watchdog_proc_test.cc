// Proc tests of hang detection (docs/elastic.md, "Hang detection and progress reports"): the real
// dslaunch and dslaunch-agent on one node, workers that are bash or Python scripts reporting
// progress through DSLAUNCH_PROGRESS_FILE. Until the launcher handles WORKER_STALLED, a stalled
// rank shows as its SIGKILL exit (137).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "tests/support/proc_checks.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";
// Hang guard for one launcher run.
constexpr std::chrono::seconds kRunTimeout{90};
// How long a stalled worker would sleep if nobody killed it, and the bound its job must end in:
// the watchdog (1 s) plus polling and stopping take a few seconds even on a loaded machine.
constexpr int kStalledSleepSeconds = 60;
constexpr double kStalledJobBoundSeconds = 30;

// `ranks` workers running `script` under bash; each first writes its pid to DIR/rankN.pid.
std::vector<std::string> BashJob(const TempDir& dir, int ranks, const std::string& script) {
  return {kLauncher, "--log_dir", dir.path() + "/logs", "--grace_period", "2", "--nproc_per_node",
          std::to_string(ranks), "--no_python", "/bin/bash", "-c",
          "echo $$ > " + dir.path() + "/rank$RANK.pid; " + script};
}

// The agent's line for a stall of `rank` with a 1 s timeout; the silence it reports is the
// timeout plus up to a poll interval or so.
// `state`: how the agent found the process (a regex).
std::regex StallLine(int rank, const std::string& step, const std::string& state = "sleeping") {
  return std::regex("dslaunch-agent\\[node 0\\]: rank " + std::to_string(rank) +
                    " reported no progress for 1\\.[0-9] s \\(" + step +
                    ", watchdog timeout 1\\.0 s\\) \\(" + state + "\\); killing it\n");
}

TEST_CASE("A rank that reports timeout=1 and then hangs is killed, and the job ends with 137") {
  TempDir dir;
  auto r = RunProcess(BashJob(dir, 2,
                              "if [ \"$RANK\" = 1 ]; then echo '0 timeout=1' > \"$DSLAUNCH_PROGRESS_FILE\"; fi; "
                              "sleep " + std::to_string(kStalledSleepSeconds)),
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 137);
  CHECK(r.seconds < kStalledJobBoundSeconds);
  CHECK(std::regex_search(r.err, StallLine(1, "last step 0")));
  // The agent's line and the launcher's summary, both about rank 1: rank 0 asked for no watchdog.
  CHECK(Count(r.err, "reported no progress") == 2);
  CHECK(Contains(r.err, "failed: rank 1 on host localhost reported no progress for "));
  CHECK(Contains(r.err, " (watchdog timeout 1.0 s; last step 0; found sleeping)\n"));
  CheckNoWorkerAlive(dir.path(), 2);
}

TEST_CASE("A rank stopped with SIGSTOP after reporting timeout=1 is detected and killed") {
  TempDir dir;
  auto r = RunProcess(BashJob(dir, 1, "echo '3 timeout=1' > \"$DSLAUNCH_PROGRESS_FILE\"; kill -STOP $$; echo resumed"),
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 137);
  CHECK(r.seconds < kStalledJobBoundSeconds);
  CHECK(std::regex_search(r.err, StallLine(0, "last step 3", "stopped")));
  CHECK(Contains(r.err, "last step 3; found stopped)"));
  CHECK_FALSE(Contains(r.out, "resumed"));
  CheckNoWorkerAlive(dir.path(), 1);
}

TEST_CASE("A Python rank reporting every 100 ms with timeout=1 for 3 s runs to completion") {
  TempDir dir;
  const std::string script = dir.path() + "/report.py";
  // The documented one-liner, with a timeout.
  std::ofstream(script) << "import os, time\n"
                           "for step in range(30):\n"
                           "    open(os.environ[\"DSLAUNCH_PROGRESS_FILE\"], \"w\").write(f\"{step} timeout=1\\n\")\n"
                           "    time.sleep(0.1)\n"
                           "print('done')\n";
  auto r = RunProcess({kLauncher, "--log_dir", dir.path() + "/logs", "--nproc_per_node", "2", script}, kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.out, "[rank 0] done\n"));
  CHECK(Contains(r.out, "[rank 1] done\n"));
  CHECK_FALSE(Contains(r.err, "reported no progress"));
  CHECK_FALSE(Contains(r.err, "progress file"));
}

TEST_CASE("A rank that never writes its progress file has no watchdog and runs to completion") {
  TempDir dir;
  // The file is there, empty, in the job's directory, before the worker starts.
  auto r = RunProcess(BashJob(dir, 1,
                              "test -f \"$DSLAUNCH_PROGRESS_FILE\" && test ! -s \"$DSLAUNCH_PROGRESS_FILE\" && "
                              "echo \"file $DSLAUNCH_PROGRESS_FILE\"; sleep 1.5; echo done"),
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  const std::regex file_line("\\[rank 0\\] file " + dir.path() + "/logs/[^/\n]+/rank0\\.progress\n");
  CHECK(std::regex_search(r.out, file_line));
  CHECK(Contains(r.out, "[rank 0] done\n"));
  CHECK_FALSE(Contains(r.err, "reported no progress"));
}

TEST_CASE("A malformed report counts as progress and is named once in a warning") {
  TempDir dir;
  // The timeout is seen first (two polls at least); then each bad write keeps the rank alive for
  // 1.5 s, and the agent warns about the first only.
  auto r = RunProcess(BashJob(dir, 1,
                              "echo '0 timeout=1' > \"$DSLAUNCH_PROGRESS_FILE\"; sleep 0.5; "
                              "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do "
                              "echo \"step $i\" > \"$DSLAUNCH_PROGRESS_FILE\"; sleep 0.1; done; echo done"),
                      kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(Contains(r.out, "[rank 0] done\n"));
  CHECK(std::regex_search(
      r.err, std::regex("dslaunch-agent\\[node 0\\]: rank 0: progress file '[^']*/rank0\\.progress': step 'step' is "
                        "not a non-negative integer \\(expected 'STEP \\[timeout=SECONDS\\] \\[NAME=NUMBER \\.\\.\\.\\]'\\); the write still "
                        "counts as progress\n")));
  CHECK(Count(r.err, "progress file") == 1);
  CHECK_FALSE(Contains(r.err, "reported no progress"));
}

}  // namespace
}  // namespace dslaunch::testing
