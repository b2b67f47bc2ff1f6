// ProgressFigures: what a worker's progress report says about its training, beyond the step and
// the watchdog timeout (docs/observability.md, "Progress reports"): the last step's time, loss and
// throughput, the last validation loss, the last checkpoint save. The runtime writes them
// (runtime/train/progress_report.h), the agent parses them (agent/progress/progress_watchdog.h) and forwards
// them (WORKER_PROGRESS, common/control_messages.h), the launcher shows them
// (launcher/status/job_status.h). This file holds the one table of their names. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace dslaunch {

// Every figure is optional: a report carries what its writer knows. Doubles are finite; the ones
// that measure time, throughput or bytes are >= 0.
struct ProgressFigures {
  std::optional<double> step_ms;       // the wall time of the report's step, in milliseconds
  std::optional<double> loss;          // the training loss of that step
  std::optional<double> tokens_per_s;  // the job's throughput over that step
  // The part of step_ms spent outside collectives (waiting for peers excluded): what the straggler
  // rule compares when given (synchronous training makes step_ms the same on every rank).
  std::optional<double> compute_ms;
  std::optional<double> val_loss;      // the last validation loss
  std::optional<int64_t> val_step;     // the step that validation ran after
  std::optional<double> ckpt_s;        // the last checkpoint save's duration, in seconds
  std::optional<int64_t> ckpt_bytes;   // the last checkpoint's size (all shards), in bytes
  std::optional<int64_t> ckpt_step;    // the step that checkpoint saved

  bool empty() const { return *this == ProgressFigures{}; }
  bool operator==(const ProgressFigures&) const = default;
};

// The names a report may give, in the order FormatProgressFigures writes them, for messages:
// "step_ms, compute_ms, loss, tokens_per_s, val_loss, val_step, ckpt_s, ckpt_bytes, ckpt_step".
std::string ProgressFigureNames();

// Sets the figure `name` from the text `value`. kInvalidArgument for an unknown name, a figure
// already set, or a value that is not a finite number (not >= 0 for times, throughput and bytes;
// not a non-negative integer for the steps and bytes), e.g.
// "loss 'nan' is not a finite number".
Status SetProgressFigure(ProgressFigures& figures, std::string_view name, std::string_view value);

// " step_ms=12.5 loss=2.31250811 ...": each figure present as " NAME=VALUE", in the order above;
// "" when none is. Doubles keep 9 significant digits for losses (a float's loss round-trips) and
// 6 for the others; a value that is not finite (a diverged loss) is left out rather than written
// as something the parser refuses.
std::string FormatProgressFigures(const ProgressFigures& figures);

}  // namespace dslaunch
