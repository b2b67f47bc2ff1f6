#include "launcher/status/straggler_detector.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/order_statistics.h"

namespace dslaunch::launcher {
namespace {

std::string Millis(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), ms < 10 ? "%.1f" : "%.0f", ms);
  return buf;
}

std::string Number(const char* form, double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), form, v);
  return buf;
}

// "412 ms/step against a median of 198 ms over 20 steps"
std::string Figures(const Straggler& s) {
  return Millis(s.median_ms) + " ms/step against a median of " + Millis(s.peers_median_ms) + " ms over " +
         std::to_string(s.window) + " steps";
}

std::string Who(const Straggler& s) { return "rank " + std::to_string(s.rank) + (s.host.empty() ? "" : " on " + s.host); }

}  // namespace

Status ValidateStragglerOptions(const StragglerOptions& options) {
  if (!std::isfinite(options.factor) || (options.factor != 0 && options.factor <= 1)) {
    return InvalidArgumentError("--straggler_factor " + Number("%g", options.factor) +
                                " must be above 1 (a rank that many times slower than its peers is flagged), "
                                "or 0 to turn straggler detection off");
  }
  if (options.window < 1 || options.window > kMaxStragglerWindow) {
    return InvalidArgumentError("--straggler_window " + std::to_string(options.window) + " must be 1.." +
                                std::to_string(kMaxStragglerWindow) + " steps");
  }
  if (!std::isfinite(options.margin_ms) || options.margin_ms < 0) {
    return InvalidArgumentError("--straggler_margin_ms " + Number("%g", options.margin_ms) +
                                " must be 0 or more (milliseconds per step a straggler is behind its peers' median "
                                "at least)");
  }
  if (options.patience < 1 || options.patience > kMaxStragglerPatience) {
    return InvalidArgumentError("--straggler_patience " + std::to_string(options.patience) + " must be 1.." +
                                std::to_string(kMaxStragglerPatience) + " checks in a row");
  }
  return Status::Ok();
}

std::string DescribeStraggler(const Straggler& s, const StragglerOptions& rule) {
  return Who(s) + " is a straggler since step " + std::to_string(s.since_step) + ": " + Figures(s) + " (" +
         Number("%.1f", s.median_ms / s.peers_median_ms) + "x; the rule: above " + Number("%g", rule.factor) +
         "x and " + Number("%g", rule.margin_ms) + " ms more, " + std::to_string(rule.patience) +
         (rule.patience == 1 ? " check" : " checks") + " in a row)";
}

std::string DescribeStragglerCleared(const Straggler& s, int64_t step) {
  return Who(s) + " is no longer a straggler at step " + std::to_string(step) + ": " + Figures(s);
}

bool SlowerThanPeers(double median_ms, double peers_median_ms, const StragglerOptions& rule) {
  return peers_median_ms > 0 && median_ms > rule.factor * peers_median_ms &&
         median_ms - peers_median_ms > rule.margin_ms;
}

StragglerDetector::StragglerDetector(StragglerOptions options) : options_(options) {}

void StragglerDetector::Reset() { ranks_.clear(); }

bool StragglerDetector::flagged(int rank) const {
  auto it = ranks_.find(rank);
  return it != ranks_.end() && it->second.flagged;
}

std::optional<Straggler> StragglerDetector::Flagged(int rank) const {
  auto it = ranks_.find(rank);
  if (it == ranks_.end() || !it->second.flagged) return std::nullopt;
  const Rank& r = it->second;
  return Straggler{rank, "", *r.median, r.peers_median, options_.window, r.since_step};
}

std::optional<StragglerChange> StragglerDetector::AddStepTime(int rank, int64_t step, double step_ms) {
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
  // Only this rank is checked: its median is the one that changed, and a straggler reports too.
  std::vector<double> peers;
  for (const auto& [other, p] : ranks_) {
    if (other != rank && p.median) peers.push_back(*p.median);
  }
  if (peers.empty()) return std::nullopt;
  r.peers_median = Median(std::move(peers));
  const bool slow = SlowerThanPeers(*r.median, r.peers_median, options_);
  if (slow == r.flagged) {
    r.streak = 0;
    return std::nullopt;
  }
  if (++r.streak < options_.patience) return std::nullopt;
  r.streak = 0;
  r.flagged = slow;
  if (slow) r.since_step = step;
  StragglerChange change{slow ? StragglerChange::Kind::kFlagged : StragglerChange::Kind::kCleared,
                         Straggler{rank, "", *r.median, r.peers_median, options_.window, r.since_step}};
  if (!slow) r.since_step = -1;
  return change;
}

}  // namespace dslaunch::launcher
