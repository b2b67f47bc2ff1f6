// Progress reports (runtime/train/progress_report.h, runtime/train/progress_file.h): the timeout in effect in
// each phase and from each source, the report format, the reporter's sequence around slow phases,
// the communicator timeout derived from it, and the file that takes the reports (real files).
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <fstream>
#include <iterator>

#include "runtime/train/progress_file.h"
#include "runtime/train/progress_report.h"
#include "tests/support/subprocess.h"

namespace dslaunch::runtime {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_CASE("The watchdog timeout comes from the environment, else train.json, else the step times") {
  struct Case {
    const char* name;
    WatchdogSettings settings;
    double startup, training, slow;
  };
  const Case cases[] = {
      {"environment wins", {45.0, 20.0}, kStartupAllowance, 45.0, kSlowPhaseAllowance},
      {"train.json", {std::nullopt, 20.0}, kStartupAllowance, 20.0, kSlowPhaseAllowance},
      {"0 is off in every phase", {std::nullopt, 0.0}, 0.0, 0.0, 0.0},
      {"environment 0 turns off a train.json timeout", {0.0, 20.0}, 0.0, 0.0, 0.0},
      {"a timeout past the allowances is kept", {std::nullopt, 1000.0}, 1000.0, 1000.0, 1000.0},
      {"derived: the start-up allowance before steps are measured", {}, kStartupAllowance, kStartupAllowance,
       kSlowPhaseAllowance},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    WatchdogTimeout w(c.settings);
    w.AddStep(0.5);  // one step: not enough to derive
    CHECK(w.For(ProgressPhase::kStartup) == c.startup);
    CHECK(w.For(ProgressPhase::kTraining) == c.training);
    CHECK(w.For(ProgressPhase::kSlow) == c.slow);
  }
}

TEST_CASE("The derived timeout is max(60 s, 10 x the median step) once 5 steps are measured, in whole seconds") {
  WatchdogTimeout fast({});
  for (int i = 0; i < kStepsBeforeDerived - 1; ++i) fast.AddStep(0.1);
  CHECK(fast.For(ProgressPhase::kTraining) == kStartupAllowance);
  fast.AddStep(30.0);  // one slow step does not move the median
  CHECK(fast.For(ProgressPhase::kTraining) == kMinDerivedTimeout);

  WatchdogTimeout slow({});
  for (double s : {7.0, 9.5, 8.21, 100.0, 8.3}) slow.AddStep(s);  // median 8.3
  CHECK(slow.For(ProgressPhase::kTraining) == 83.0);
  CHECK(slow.For(ProgressPhase::kSlow) == kSlowPhaseAllowance);
  CHECK(slow.For(ProgressPhase::kStartup) == kStartupAllowance);

  // The median follows the last kStepTimeWindow steps: a run that slows down gets a longer timeout.
  for (size_t i = 0; i < kStepTimeWindow; ++i) slow.AddStep(20.0);
  CHECK(slow.For(ProgressPhase::kTraining) == 200.0);
  CHECK(slow.For(ProgressPhase::kSlow) == kSlowPhaseAllowance);
  for (size_t i = 0; i < kStepTimeWindow; ++i) slow.AddStep(70.0);
  CHECK(slow.For(ProgressPhase::kSlow) == 700.0);  // the allowance is a minimum
}

TEST_CASE("The reporter writes the latest figures in every report, validation and saves at once") {
  std::vector<std::string> reports;
  ProgressReporter r({std::nullopt, 20.0}, [&](const std::string& s) { reports.push_back(s); });
  r.Starting(0);
  r.StepDone(1, 0.25, 2.5, 4096.0);
  r.ValidationDone(1, 2.75);
  r.CheckpointSaved(1, 1.5, 123456789012);
  r.StepDone(2, 0.125, 2.25, 8192.0);
  r.StillWorking();
  CHECK(reports == std::vector<std::string>{
                       "0 timeout=300\n",
                       "1 timeout=20 step_ms=250 loss=2.5 tokens_per_s=4096\n",
                       "1 timeout=20 step_ms=250 loss=2.5 tokens_per_s=4096 val_loss=2.75 val_step=1\n",
                       "1 timeout=20 step_ms=250 loss=2.5 tokens_per_s=4096 val_loss=2.75 val_step=1 ckpt_s=1.5 "
                       "ckpt_bytes=123456789012 ckpt_step=1\n",
                       "2 timeout=20 step_ms=125 loss=2.25 tokens_per_s=8192 val_loss=2.75 val_step=1 ckpt_s=1.5 "
                       "ckpt_bytes=123456789012 ckpt_step=1\n",
                       "2 timeout=20 step_ms=125 loss=2.25 tokens_per_s=8192 val_loss=2.75 val_step=1 ckpt_s=1.5 "
                       "ckpt_bytes=123456789012 ckpt_step=1\n"});
  // The time outside collectives, when the loop knows it.
  r.StepDone(3, 0.5, 2.0, 100.0, 0.125);
  CHECK(reports.back().rfind("3 timeout=20 step_ms=500 compute_ms=125 loss=2 tokens_per_s=100 val_loss=2.75", 0) == 0);
  // A step without a loss (a program that knows none) drops the previous step's.
  r.StepDone(3, 0.5);
  CHECK(reports.back() == "3 timeout=20 step_ms=500 val_loss=2.75 val_step=1 ckpt_s=1.5 ckpt_bytes=123456789012 "
                          "ckpt_step=1\n");
}

TEST_CASE("A report is the step and the timeout on one line") {
  CHECK(FormatProgressReport(41, 90.0) == "41 timeout=90\n");
  CHECK(FormatProgressReport(0, 0.0) == "0 timeout=0\n");
  CHECK(FormatProgressReport(7, 0.5) == "7 timeout=0.5\n");
  CHECK(FormatProgressReport(12345678901, 2.125) == "12345678901 timeout=2.125\n");
}

TEST_CASE("DSLAUNCH_WATCHDOG_TIMEOUT is read as seconds, and a bad value names the variable") {
  using Env = std::map<std::string, std::string>;
  CHECK_FALSE(ParseWatchdogTimeoutEnv(Env{})->has_value());
  CHECK_FALSE(ParseWatchdogTimeoutEnv(Env{{"DSLAUNCH_WATCHDOG_TIMEOUT", ""}})->has_value());
  CHECK(**ParseWatchdogTimeoutEnv(Env{{"DSLAUNCH_WATCHDOG_TIMEOUT", "90"}}) == 90.0);
  CHECK(**ParseWatchdogTimeoutEnv(Env{{"DSLAUNCH_WATCHDOG_TIMEOUT", "2.5"}}) == 2.5);
  CHECK(**ParseWatchdogTimeoutEnv(Env{{"DSLAUNCH_WATCHDOG_TIMEOUT", "0"}}) == 0.0);
  for (const char* bad : {"-1", "ten", "5s", "inf", "nan"}) {
    CAPTURE(bad);
    auto r = ParseWatchdogTimeoutEnv(Env{{"DSLAUNCH_WATCHDOG_TIMEOUT", bad}});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() ==
          "DSLAUNCH_WATCHDOG_TIMEOUT='" + std::string(bad) + "' is not a number of seconds >= 0 (0 = no watchdog)");
  }
}

TEST_CASE("The collective timeout is twice the watchdog timeout, or the default with the watchdog off") {
  using std::chrono::milliseconds;
  CHECK(CollectiveTimeoutFor(90.0, milliseconds(300000)) == milliseconds(180000));
  CHECK(CollectiveTimeoutFor(0.25, milliseconds(300000)) == milliseconds(500));
  CHECK(CollectiveTimeoutFor(0.0, milliseconds(300000)) == milliseconds(300000));
}

TEST_CASE("The reporter writes the start, each step, and a longer allowance around slow phases") {
  std::vector<std::string> reports;
  std::vector<double> timeouts;
  ProgressReporter r({std::nullopt, 20.0}, [&](const std::string& s) { reports.push_back(s); },
                     [&](double t) { timeouts.push_back(t); });
  r.Starting(0);
  {
    ScopedSlowPhase load(&r);  // a checkpoint load at start-up
  }
  r.Starting(4);
  r.StepDone(5, 0.1);
  r.StillWorking();
  {
    ScopedSlowPhase save(&r);
    ScopedSlowPhase nested(&r);
  }
  r.StepDone(6, 0.1);
  ScopedSlowPhase none(nullptr);  // no reporter: nothing happens
  // Every report after a step repeats that step's time (the agent samples the file).
  CHECK(reports == std::vector<std::string>{"0 timeout=300\n", "0 timeout=600\n", "0 timeout=300\n",
                                            "4 timeout=300\n", "5 timeout=20 step_ms=100\n",
                                            "5 timeout=20 step_ms=100\n", "5 timeout=600 step_ms=100\n",
                                            "5 timeout=600 step_ms=100\n", "5 timeout=600 step_ms=100\n",
                                            "5 timeout=20 step_ms=100\n", "6 timeout=20 step_ms=100\n"});
  CHECK(timeouts == std::vector<double>{300.0, 600.0, 300.0, 20.0, 600.0, 20.0});
  CHECK(r.timeout() == 20.0);
  CHECK(r.step() == 6);
}

TEST_CASE("The progress file holds the last report, also after a shorter one") {
  dslaunch::testing::TempDir dir;
  const std::string path = dir.path() + "/progress.0";
  std::ofstream(path) << "999999 timeout=123456\n";  // a longer report left by an earlier generation
  std::vector<std::string> warnings;
  ProgressFile file(path, [&](const std::string& w) { warnings.push_back(w); });
  file.Write("1 timeout=300\n");
  CHECK(Slurp(path) == "1 timeout=300\n");
  file.Write("12 timeout=300\n");
  CHECK(Slurp(path) == "12 timeout=300\n");
  file.Write("12 timeout=60\n");
  CHECK(Slurp(path) == "12 timeout=60\n");
  CHECK(warnings.empty());
}

TEST_CASE("A progress file that cannot be written is warned about once and training goes on") {
  dslaunch::testing::TempDir dir;
  std::vector<std::string> warnings;
  const std::string path = dir.path() + "/missing/progress.0";  // its directory does not exist
  ProgressFile file(path, [&](const std::string& w) { warnings.push_back(w); });
  file.Write("1 timeout=300\n");
  file.Write("2 timeout=300\n");
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] == "progress file " + path +
                           ": cannot open: No such file or directory; training goes on, but the agent may take this "
                           "rank for hung (reported once)");

  // A write that fails (a full device) is warned about once as well.
  std::vector<std::string> full_warnings;
  ProgressFile full("/dev/full", [&](const std::string& w) { full_warnings.push_back(w); });
  full.Write("1 timeout=300\n");
  full.Write("2 timeout=300\n");
  REQUIRE(full_warnings.size() == 1);
  CHECK(full_warnings[0].find("progress file /dev/full: cannot write: No space left on device") == 0);
}

}  // namespace
}  // namespace dslaunch::runtime
