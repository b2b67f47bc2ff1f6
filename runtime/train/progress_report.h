// Progress reports for hang detection and the launcher's view of the job (docs/engine.md,
// "Progress reports"; docs/observability.md). The agent gives every rank a file
// (DSLAUNCH_PROGRESS_FILE); each rewrite is one report, "STEP timeout=SECONDS [NAME=NUMBER ...]":
// the last completed step, how long the agent should wait for the next report before it takes the
// rank for hung (0 = never), and the figures known so far (common/progress_figures.h: the last
// step's time, loss and tokens/s, the last validation loss, the last checkpoint save; each repeated
// in every later report until replaced, since the agent samples the file and may miss a write).
// The runtime reports at start-up, after every step, during validation and after it, after a
// checkpoint save, and around the slow phases (checkpoint save and load, the final sample), which
// get a longer allowance first and the normal timeout after.
//
// WatchdogTimeout decides the timeout (pure); ProgressReporter formats the reports and hands them
// to a writer (runtime/train/progress_file.h in the worker, a capture in tests). Not thread-safe: the
// training thread reports.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/progress_figures.h"
#include "common/status.h"

namespace dslaunch::runtime {

// Until a few steps are measured (or with a fixed timeout, until the first step is done): start-up
// covers reading data, forming the Gloo mesh (up to a minute per peer), allocating the model and
// the first steps, which touch every buffer for the first time.
inline constexpr double kStartupAllowance = 300.0;
// Around checkpoint save and load and the final sample: a rank's share of a checkpoint of a
// model this runtime trains (a few GB) moves at a slow shared file system's 10 MB/s in this time.
inline constexpr double kSlowPhaseAllowance = 600.0;
// The derived timeout is max(kMinDerivedTimeout, kStepTimeFactor x median step time): a minute
// absorbs a loaded node's scheduling hiccups; 10 steps' time absorbs stragglers and validation
// batches, which report one by one.
inline constexpr double kMinDerivedTimeout = 60.0;
inline constexpr double kStepTimeFactor = 10.0;
// Steps measured before the derived timeout replaces the start-up allowance (the first step is
// often several times slower than the rest).
inline constexpr int kStepsBeforeDerived = 5;
// The median is taken over the last this many steps: it follows a run that speeds up or slows
// down, and costs a copy of this many doubles per step.
inline constexpr size_t kStepTimeWindow = 64;

enum class ProgressPhase {
  kStartup,   // before the first step of this process
  kTraining,  // between steps
  kSlow,      // checkpoint save or load, the final sample
};

// Where a timeout comes from, in order of precedence.
struct WatchdogSettings {
  std::optional<double> env_seconds;     // DSLAUNCH_WATCHDOG_TIMEOUT (the launcher's --watchdog_timeout)
  std::optional<double> config_seconds;  // train.json train.watchdog_timeout
};

// The timeout in effect. A fixed timeout T (from the environment, else train.json) applies between
// steps; 0 turns the watchdog off in every phase. Without one, the timeout is derived from the
// step times once kStepsBeforeDerived are measured (rounded up to whole seconds, so it changes
// rarely), and is kStartupAllowance before. Start-up and slow phases get at least their
// allowance in either case.
class WatchdogTimeout {
 public:
  explicit WatchdogTimeout(WatchdogSettings settings);
  void AddStep(double seconds);
  // Seconds (0 = off).
  double For(ProgressPhase phase) const;
  // The fixed timeout, if any (0 = off).
  std::optional<double> fixed() const { return fixed_; }

 private:
  std::optional<double> fixed_;
  std::vector<double> window_;  // ring of the last kStepTimeWindow step times
  size_t next_ = 0;
  int64_t measured_ = 0;
};

// "41 timeout=90\n"; a fractional timeout keeps up to 3 decimals ("7 timeout=0.5\n"); the figures
// follow the timeout (FormatProgressFigures): "41 timeout=90 step_ms=12.5 loss=2.5\n".
std::string FormatProgressReport(int64_t step, double timeout_seconds, const ProgressFigures& figures = {});

// DSLAUNCH_WATCHDOG_TIMEOUT from the environment map: nullopt when unset or empty;
// kInvalidArgument naming the variable for a value that is not a number >= 0.
Result<std::optional<double>> ParseWatchdogTimeoutEnv(const std::map<std::string, std::string>& env);

// Gloo's collective timeout for a watchdog timeout: kCollectiveTimeoutFactor times it, so that the
// agent names the stuck rank before its peers' collectives time out; `when_off` when the watchdog
// is off (0).
inline constexpr double kCollectiveTimeoutFactor = 2.0;
std::chrono::milliseconds CollectiveTimeoutFor(double watchdog_seconds, std::chrono::milliseconds when_off);

class ProgressReporter {
 public:
  using Writer = std::function<void(const std::string& report)>;
  // `write` takes every report (may be empty: nothing is written, the timeout is still kept);
  // `on_timeout` (optional) is told the timeout in effect whenever it changes, starting with the
  // first report.
  ProgressReporter(WatchdogSettings settings, Writer write, std::function<void(double)> on_timeout = {});

  // Start-up: `step` steps are done (0, or the step of the checkpoint resumed).
  void Starting(int64_t step);
  // Step `step` (1-based: the steps done) completed in `seconds`, with its loss, the job's tokens
  // (samples) per second over it, and the seconds of it spent outside collectives, when known.
  void StepDone(int64_t step, double seconds, std::optional<double> loss = std::nullopt,
                std::optional<double> tokens_per_s = std::nullopt,
                std::optional<double> compute_seconds = std::nullopt);
  // A validation after `after_step` steps gave `loss`: reported at once (the run may end next).
  void ValidationDone(int64_t after_step, double loss);
  // A checkpoint of `step` was saved in `seconds`, `bytes` in all: reported at once.
  void CheckpointSaved(int64_t step, double seconds, uint64_t bytes);
  // The same step and timeout again: the rank is working between steps (a validation batch).
  void StillWorking();
  // Around a slow phase; they nest (the outermost decides).
  void BeginSlowPhase();
  void EndSlowPhase();

  // The timeout of the last report (seconds, 0 = off).
  double timeout() const { return timeout_; }
  int64_t step() const { return step_; }
  const ProgressFigures& figures() const { return figures_; }

 private:
  void Report();

  WatchdogTimeout watchdog_;
  Writer write_;
  std::function<void(double)> on_timeout_;
  int64_t step_ = 0;
  ProgressFigures figures_;  // the latest of each, written in every report
  bool stepped_ = false;  // a step completed in this process
  int slow_depth_ = 0;
  double timeout_ = -1.0;  // none reported yet
};

// Marks a slow phase for its scope; a null reporter does nothing.
class ScopedSlowPhase {
 public:
  explicit ScopedSlowPhase(ProgressReporter* reporter) : reporter_(reporter) {
    if (reporter_ != nullptr) reporter_->BeginSlowPhase();
  }
  ~ScopedSlowPhase() {
    if (reporter_ != nullptr) reporter_->EndSlowPhase();
  }
  ScopedSlowPhase(const ScopedSlowPhase&) = delete;
  ScopedSlowPhase& operator=(const ScopedSlowPhase&) = delete;

 private:
  ProgressReporter* reporter_;
};

}  // namespace dslaunch::runtime
