#include "common/endpoint/refusal_report.h"

#include <algorithm>
#include <cstdio>

namespace dslaunch {

std::optional<std::string> RefusalReport::Record(const std::string& address,
                                                 std::string_view reason, Clock::time_point now) {
  const bool first = !interval_start_.has_value();
  if (first) interval_start_ = now;
  ++in_interval_;
  ++total_;
  latest_reason_ = std::string(reason);
  if (auto it = by_address_.find(address); it != by_address_.end()) {
    ++it->second;
  } else if (by_address_.size() < max_addresses_) {
    by_address_.emplace(address, 1);
  } else {
    addresses_overflowed_ = true;
  }
  if (!first) return std::nullopt;
  logged_in_interval_ = true;
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(interval_).count();
  return "refused an unauthenticated connection from " + address + ": " + std::string(reason) +
         " (further refusals are counted and reported every " + std::to_string(seconds) + " s)";
}

std::optional<RefusalReport::Clock::time_point> RefusalReport::due() const {
  if (!interval_start_) return std::nullopt;
  return *interval_start_ + interval_;
}

std::string RefusalReport::Summary(Clock::time_point now) const {
  char elapsed[32];
  std::snprintf(elapsed, sizeof(elapsed), "%.1f",
                std::chrono::duration<double>(now - *interval_start_).count());
  std::string from;
  if (by_address_.size() == 1 && !addresses_overflowed_) {
    from = by_address_.begin()->first;
  } else {
    from = std::string(addresses_overflowed_ ? "at least " : "") +
           std::to_string(by_address_.size()) + " addresses";
  }
  std::string line = "refused " + std::to_string(in_interval_) + " unauthenticated connection" +
                     (in_interval_ == 1 ? "" : "s") + " from " + from + " (" +
                     std::to_string(total_) + " in total) in the last " + elapsed + " s";
  if (by_address_.size() > 1 || addresses_overflowed_) {
    std::vector<std::pair<uint64_t, const std::string*>> top;
    top.reserve(by_address_.size());
    for (const auto& [address, count] : by_address_) top.emplace_back(count, &address);
    const size_t n = std::min(kNamedAddressesPerSummary, top.size());
    std::partial_sort(top.begin(), top.begin() + static_cast<ptrdiff_t>(n), top.end(),
                      [](const auto& a, const auto& b) {
                        return a.first != b.first ? a.first > b.first : *a.second < *b.second;
                      });
    line += ", most from ";
    for (size_t i = 0; i < n; ++i) {
      line += (i ? ", " : "") + *top[i].second + " (" + std::to_string(top[i].first) + ")";
    }
  }
  return line + "; latest: " + latest_reason_;
}

std::vector<std::string> RefusalReport::Flush(Clock::time_point now, bool final) {
  std::vector<std::string> lines;
  if (!interval_start_ || (!final && now < *interval_start_ + interval_)) return lines;
  if (in_interval_ > (logged_in_interval_ ? 1u : 0u)) lines.push_back(Summary(now));
  if (in_interval_ == 0) {
    interval_start_.reset();  // quiet for a whole interval: the episode is over
    total_ = 0;
  } else {
    interval_start_ = now;  // keep it open one more interval, so a quiet one ends it
  }
  in_interval_ = 0;
  logged_in_interval_ = false;
  addresses_overflowed_ = false;
  by_address_.clear();
  return lines;
}

}  // namespace dslaunch
