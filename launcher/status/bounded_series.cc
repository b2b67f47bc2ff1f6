#include "launcher/status/bounded_series.h"

#include "common/check.h"

namespace dslaunch::launcher {

BoundedSeries::BoundedSeries(size_t max_points) : max_points_(max_points) {
  DSLAUNCH_CHECK(max_points >= 2) << "a series needs room for 2 points";
}

void BoundedSeries::Add(SeriesPoint point) {
  const bool keep = arrivals_ % stride_ == 0;
  ++arrivals_;
  if (!keep) {
    tail_ = point;
    return;
  }
  tail_.reset();
  kept_.push_back(point);
  if (kept_.size() < max_points_) return;
  // Thin evenly: keep every second point (0, 2, 4, ...), and take every 2 x stride-th from now on.
  size_t out = 0;
  for (size_t i = 0; i < kept_.size(); i += 2) kept_[out++] = kept_[i];
  // The newest point was odd-numbered and dropped: it stays visible as the tail until the next one.
  if (kept_.size() % 2 == 0) tail_ = kept_.back();
  kept_.resize(out);
  stride_ *= 2;
}

std::vector<SeriesPoint> BoundedSeries::Points() const {
  std::vector<SeriesPoint> points = kept_;
  if (tail_) points.push_back(*tail_);
  return points;
}

std::optional<SeriesPoint> BoundedSeries::latest() const {
  if (tail_) return tail_;
  if (kept_.empty()) return std::nullopt;
  return kept_.back();
}

}  // namespace dslaunch::launcher
