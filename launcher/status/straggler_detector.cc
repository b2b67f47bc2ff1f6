#include "launcher/status/straggler_detector.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dslaunch::launcher {
namespace {

// The median of `values` (non-empty): the middle one, or the mean of the two middle ones.
double Median(std::vector<double> values) {
  const size_t half = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(half), values.end());
  const double upper = values[half];
  if (values.size() % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(half));
  return (lower + upper) / 2;
}

std::string Millis(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), ms < 10 ? "%.1f" : "%.0f", ms);
  return buf;
}

}  // namespace

Status ValidateStragglerOptions(const StragglerOptions& options) {
  if (!std::isfinite(options.factor) || (options.factor != 0 && options.factor <= 1)) {
    char shown[32];
    std::snprintf(shown, sizeof(shown), "%g", options.factor);
    return InvalidArgumentError(std::string("--straggler_factor ") + shown +
                                " must be above 1 (a rank that many times slower than its peers is flagged), "
                                "or 0 to turn straggler detection off");
  }
  if (options.window < 1 || options.window > kMaxStragglerWindow) {
    return InvalidArgumentError("--straggler_window " + std::to_string(options.window) + " must be 1.." +
                                std::to_string(kMaxStragglerWindow) + " steps");
  }
  return Status::Ok();
}

std::string DescribeStraggler(const Straggler& s) {
  return "rank " + std::to_string(s.rank) + (s.host.empty() ? "" : " on " + s.host) + " is a straggler: " +
         Millis(s.median_ms) + " ms/step against a median of " + Millis(s.peers_median_ms) + " ms over " +
         std::to_string(s.window) + " steps";
}

StragglerDetector::StragglerDetector(StragglerOptions options) : options_(options) {}

void StragglerDetector::Reset() { ranks_.clear(); }

bool StragglerDetector::flagged(int rank) const {
  auto it = ranks_.find(rank);
  return it != ranks_.end() && it->second.flagged;
}

std::optional<Straggler> StragglerDetector::AddStepTime(int rank, double step_ms) {
  if (!enabled() || !std::isfinite(step_ms)) return std::nullopt;
  Rank& r = ranks_[rank];
  const size_t window = static_cast<size_t>(options_.window);
  if (r.window.size() < window) {
    r.window.push_back(step_ms);
  } else {
    r.window[r.next] = step_ms;
    r.next = (r.next + 1) % window;
  }
  if (r.window.size() < window) return std::nullopt;
  r.median = Median(r.window);
  if (r.flagged) return std::nullopt;
  // Only this rank is judged: its median is the one that changed, and a straggler reports too.
  std::vector<double> peers;
  for (const auto& [other, p] : ranks_) {
    if (other != rank && p.median) peers.push_back(*p.median);
  }
  if (peers.empty()) return std::nullopt;
  const double reference = Median(std::move(peers));
  if (reference <= 0 || *r.median <= options_.factor * reference) return std::nullopt;
  r.flagged = true;
  return Straggler{rank, "", *r.median, reference, options_.window};
}

}  // namespace dslaunch::launcher
