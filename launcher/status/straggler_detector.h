// StragglerDetector: the straggler rule (docs/observability.md, "Straggler rule"), pure. Fed one
// step time per rank per new step it reported (the `step_ms` of WORKER_PROGRESS), it flags a rank
// whose median step time over its last `window` steps exceeds the median of its peers' medians by
// `factor`, once the rank has a full window; each rank at most once until Reset (a new
// generation). Peers: the other ranks with a full window; a rank with none is never flagged (a
// world of 1 never; with 2 ranks the slower is compared with the other). Not thread-safe; no
// clock, no I/O.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace dslaunch::launcher {

// A rank half again as slow as the median of its peers costs a synchronous job a third of its
// speed and lies well outside the few percent healthy data-parallel ranks differ by.
inline constexpr double kDefaultStragglerFactor = 1.5;
// Twenty steps: more than half of them must be slow to flag a rank (the median), so a checkpoint
// or a validation step cannot, and a rank is flagged within a minute of steps of a few seconds.
inline constexpr int kDefaultStragglerWindow = 20;
// The largest window: the detector keeps this many doubles per rank.
inline constexpr int kMaxStragglerWindow = 10000;

struct StragglerOptions {
  double factor = kDefaultStragglerFactor;  // 0: off; otherwise > 1
  int window = kDefaultStragglerWindow;     // 1..kMaxStragglerWindow
};

// kInvalidArgument naming the option (--straggler_factor, --straggler_window) and the range.
Status ValidateStragglerOptions(const StragglerOptions& options);

// A rank just flagged: its median and its peers' over the window.
struct Straggler {
  int rank = 0;
  std::string host;  // filled in by the caller that knows it (JobStatus)
  double median_ms = 0;
  double peers_median_ms = 0;
  int window = 0;

  bool operator==(const Straggler&) const = default;
};

// "rank 5 on host-2 is a straggler: 412 ms/step against a median of 198 ms over 20 steps"
// (milliseconds rounded to whole ones, or one decimal below 10 ms).
std::string DescribeStraggler(const Straggler& straggler);

class StragglerDetector {
 public:
  explicit StragglerDetector(StragglerOptions options = {});

  bool enabled() const { return options_.factor > 0; }

  // Forgets every rank's window and flag (a new generation: ranks are renumbered).
  void Reset();

  // One step time of `rank` (a new step). Returns the rank when this sample makes it a straggler
  // for the first time; nothing when detection is off.
  std::optional<Straggler> AddStepTime(int rank, double step_ms);

  bool flagged(int rank) const;

 private:
  struct Rank {
    std::vector<double> window;  // ring of the last options_.window step times
    size_t next = 0;
    std::optional<double> median;  // once the window is full
    bool flagged = false;
  };

  StragglerOptions options_;
  std::map<int, Rank> ranks_;
};

}  // namespace dslaunch::launcher
