// Proc test of the straggler rule (docs/observability.md, "Straggler rule"): the real dslaunch and
// dslaunch-agent on one node, three bash workers that time their steps and report them through
// DSLAUNCH_PROGRESS_FILE; rank 1 sleeps longer per step, on purpose.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "tests/support/proc_checks.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

const std::string kLauncher = std::string(DSLAUNCH_BIN_DIR) + "/dslaunch";
// Hang guard for one launcher run.
constexpr std::chrono::seconds kRunTimeout{90};

// Each rank runs `steps` steps of `sleep` seconds (rank 1: `slow_sleep`), timing each with bash's
// $EPOCHREALTIME and reporting "STEP step_ms=MS" after it. The agent polls every 200 ms, so steps
// of 0.3 s or more are each seen.
std::vector<std::string> TimedJob(const TempDir& dir, int steps, const std::string& sleep,
                                  const std::string& slow_sleep, const std::vector<std::string>& extra = {}) {
  const std::string script =
      "d=" + sleep + "; [ \"$RANK\" = 1 ] && d=" + slow_sleep + "; "
      "for step in $(seq 1 " + std::to_string(steps) + "); do "
      "  start=${EPOCHREALTIME/./}; sleep $d; now=${EPOCHREALTIME/./}; "
      "  echo \"$step step_ms=$(( (now - start) / 1000 )) loss=2.5\" > \"$DSLAUNCH_PROGRESS_FILE\"; "
      "done";
  std::vector<std::string> argv = {kLauncher, "--log_dir", dir.path() + "/logs", "--events_file",
                                   dir.path() + "/events.jsonl", "--straggler_window", "5", "--straggler_patience", "2"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  for (const char* a : {"--nproc_per_node", "3", "--no_python", "/bin/bash", "-c"}) argv.push_back(a);
  argv.push_back(script);
  return argv;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_CASE("A rank slowed on purpose is named once as a straggler, on the console and in the events file") {
  TempDir dir;
  auto r = RunProcess(TimedJob(dir, 10, "0.3", "0.9"), kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  // Rank 1's steps take about 900 ms against the others' 300 ms: three times, above 1.5.
  CHECK(Count(r.err, "is a straggler") == 1);
  CHECK(Contains(r.err, "dslaunch: rank 1 on localhost is a straggler since step "));
  CHECK(Contains(r.err, " over 5 steps ("));
  CHECK(Contains(r.err, "x; the rule: above 1.5x and 20 ms more, 2 checks in a row)\n"));
  const std::string events = ReadAll(dir.path() + "/events.jsonl");
  INFO(events);
  CHECK(Count(events, "\"event\":\"straggler\"") == 1);
  CHECK(Contains(events, "rank 1 on localhost is a straggler since step "));
}

TEST_CASE("Ranks of the same speed are no stragglers, and --straggler_factor 0 turns the rule off") {
  TempDir dir;
  auto even = RunProcess(TimedJob(dir, 8, "0.3", "0.3"), kRunTimeout);
  INFO(even.err);
  CHECK(even.exit_code == 0);
  CHECK_FALSE(Contains(even.err, "straggler"));

  TempDir off_dir;
  auto off = RunProcess(TimedJob(off_dir, 8, "0.3", "0.9", {"--straggler_factor", "0"}), kRunTimeout);
  INFO(off.err);
  CHECK(off.exit_code == 0);
  CHECK_FALSE(Contains(off.err, "straggler"));
  CHECK_FALSE(Contains(ReadAll(off_dir.path() + "/events.jsonl"), "straggler"));
}

TEST_CASE("--straggler_margin_ms: a rank three times slower but less than the margin above its peers is no "
          "straggler") {
  // Rank 1's 900 ms steps are 600 ms above the others': flagged at the default margin of 20 ms
  // (the first case), not under a margin of 2,000 ms.
  TempDir dir;
  auto r = RunProcess(TimedJob(dir, 10, "0.3", "0.9", {"--straggler_margin_ms", "2000"}), kRunTimeout);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_FALSE(Contains(r.err, "straggler"));
  CHECK_FALSE(Contains(ReadAll(dir.path() + "/events.jsonl"), "straggler"));
}

}  // namespace
}  // namespace dslaunch::testing
