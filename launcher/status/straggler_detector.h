// StragglerDetector: the straggler rule (docs/observability.md, "Straggler rule"), pure. Fed one
// step time per rank per new step it reported (the `compute_ms`, else `step_ms`, of
// WORKER_PROGRESS), it checks a rank at each of its samples once its window is full and a peer's
// is too: the rank is slow when its median over its last `window` steps exceeds the median of its
// peers' medians by the factor AND by the margin. A rank is flagged when `patience` checks in a
// row find it slow, and cleared when `patience` checks in a row find it not slow; so one slow
// window, or a gap of a few milliseconds, never flags a rank. Peers: the other ranks with a full
// window; a rank with none is never checked (a world of 1 never; with 2 ranks each is compared
// with the other). Reset (a new generation) forgets everything. Not thread-safe; no clock, no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace dslaunch::launcher {

// A rank half again as slow as the median of its peers costs a synchronous job a third of its
// speed and lies well outside the few percent healthy data-parallel ranks differ by.
inline constexpr double kDefaultStragglerFactor = 1.5;
// Twenty steps: more than half of them must be slow to make the median slow, so a checkpoint or
// a validation step cannot, and a rank is flagged within a minute of steps of a few seconds.
inline constexpr int kDefaultStragglerWindow = 20;
// The largest window: the detector keeps this many doubles per rank.
inline constexpr int kMaxStragglerWindow = 10000;
// A gap must also be this many milliseconds per step: steps of a few milliseconds differ by
// whole factors from scheduler noise on a loaded machine, and a rank 20 ms behind costs a job of
// GPU-sized steps (100 ms and more) little. A factor alone flagged 3 ms against 1.5 ms.
inline constexpr double kDefaultStragglerMarginMs = 20;
// Checks in a row (one per new step of the rank) that must agree before a rank is flagged or
// cleared: a median that crosses the line for a step or two (a window taken while the peers'
// load changed) is not a straggler, and a straggler that recovers for a moment is not cleared.
inline constexpr int kDefaultStragglerPatience = 5;
inline constexpr int kMaxStragglerPatience = 10000;

struct StragglerOptions {
  double factor = kDefaultStragglerFactor;        // 0: off; otherwise > 1
  int window = kDefaultStragglerWindow;           // 1..kMaxStragglerWindow
  double margin_ms = kDefaultStragglerMarginMs;   // >= 0
  int patience = kDefaultStragglerPatience;       // 1..kMaxStragglerPatience
};

// kInvalidArgument naming the option (--straggler_factor, --straggler_window,
// --straggler_margin_ms, --straggler_patience) and the range.
Status ValidateStragglerOptions(const StragglerOptions& options);

// A rank and its figures at its latest check.
struct Straggler {
  int rank = 0;
  std::string host;  // filled in by the caller that knows it (JobStatus)
  double median_ms = 0;
  double peers_median_ms = 0;
  int window = 0;
  int64_t since_step = -1;  // the step whose check flagged it (the patience-th slow one in a row)

  bool operator==(const Straggler&) const = default;
};

// What one sample changed.
struct StragglerChange {
  enum class Kind { kFlagged, kCleared };
  Kind kind = Kind::kFlagged;
  Straggler straggler;  // as of this check; since_step is the flag's, also when cleared

  bool operator==(const StragglerChange&) const = default;
};

// "rank 5 on host-2 is a straggler since step 40: 412 ms/step against a median of 198 ms over 20
// steps (2.1x; the rule: above 1.5x and 20 ms more, 5 checks in a row)" (milliseconds rounded to
// whole ones, or one decimal below 10 ms).
std::string DescribeStraggler(const Straggler& straggler, const StragglerOptions& rule);
// "rank 5 on host-2 is no longer a straggler at step 90: 201 ms/step against a median of 198 ms
// over 20 steps".
std::string DescribeStragglerCleared(const Straggler& straggler, int64_t step);

// Whether `median_ms` is slow against `peers_median_ms` under `rule` (one check, no patience).
bool SlowerThanPeers(double median_ms, double peers_median_ms, const StragglerOptions& rule);

class StragglerDetector {
 public:
  explicit StragglerDetector(StragglerOptions options = {});

  bool enabled() const { return options_.factor > 0; }
  const StragglerOptions& options() const { return options_; }

  // Forgets every rank's window and flag (a new generation: ranks are renumbered).
  void Reset();

  // One step time of `rank`, for its new step `step`. Returns the change this sample made: the
  // rank flagged (the patience-th slow check in a row) or cleared (the patience-th check in a row
  // that is not slow); nothing otherwise, and nothing when detection is off.
  std::optional<StragglerChange> AddStepTime(int rank, int64_t step, double step_ms);

  bool flagged(int rank) const;
  // A flagged rank with its medians at its latest check; nothing for a rank not flagged.
  std::optional<Straggler> Flagged(int rank) const;

 private:
  struct Rank {
    std::vector<double> window;  // ring of the last options_.window step times
    size_t next = 0;
    std::optional<double> median;  // once the window is full
    double peers_median = 0;       // at the latest check
    bool flagged = false;
    int streak = 0;                // checks in a row that disagreed with `flagged`
    int64_t since_step = -1;       // the step that flagged it
  };

  StragglerOptions options_;
  std::map<int, Rank> ranks_;
};

}  // namespace dslaunch::launcher
