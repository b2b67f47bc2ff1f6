// BoundedSeries: a curve (step, value) of a job that may run a million steps, kept in bounded
// memory for the live page (docs/observability.md). Rule: points are taken every `stride`-th
// arrival (stride 1 at first); when max_points are kept, every second one is dropped (the first
// stays) and the stride doubles. So the kept points stay evenly spread over the whole run, at most
// max_points of them, and the latest point is always shown last. Pure; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "launcher/status/job_view.h"

namespace dslaunch::launcher {

// Points per curve on the page: finer than a chart's pixels, and the three curves of a view stay
// under 50 KB of JSON.
inline constexpr size_t kMaxSeriesPoints = 1000;

class BoundedSeries {
 public:
  // `max_points` >= 2.
  explicit BoundedSeries(size_t max_points = kMaxSeriesPoints);

  void Add(SeriesPoint point);
  // The kept points in arrival order, then the latest one if it was not kept; at most max_points.
  std::vector<SeriesPoint> Points() const;
  // The last point added.
  std::optional<SeriesPoint> latest() const;

 private:
  size_t max_points_;
  std::vector<SeriesPoint> kept_;
  std::optional<SeriesPoint> tail_;  // the latest point when it was not kept
  uint64_t arrivals_ = 0;
  uint64_t stride_ = 1;
};

}  // namespace dslaunch::launcher
