#include "common/endpoint/refusal_report.h"

#include <cstdio>

namespace dslaunch {

std::optional<std::string> RefusalReport::Record(const std::string& address,
                                                 std::string_view reason, Clock::time_point now) {
  if (!interval_start_) interval_start_ = now;
  auto it = by_address_.find(address);
  const bool known = it != by_address_.end();
  if (!known && by_address_.size() >= max_addresses_) {
    const bool first = others_.total == 0;
    ++others_.in_interval;
    ++others_.total;
    others_.latest_reason = std::string(reason);
    if (!first) return std::nullopt;
    others_.logged_in_interval = true;
    return "refused an unauthenticated connection from " + address + ": " + std::string(reason) +
           " (refusals from more than " + std::to_string(max_addresses_) +
           " addresses at once: further ones from addresses not yet named are summed)";
  }
  if (!known) it = by_address_.emplace(address, Tally{}).first;
  Tally& t = it->second;
  ++t.in_interval;
  ++t.total;
  t.latest_reason = std::string(reason);
  if (known) return std::nullopt;
  t.logged_in_interval = true;
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(interval_).count();
  return "refused an unauthenticated connection from " + address + ": " + std::string(reason) +
         " (further refusals from " + address + " are counted and reported every " +
         std::to_string(seconds) + " s)";
}

std::optional<RefusalReport::Clock::time_point> RefusalReport::due() const {
  if (!interval_start_) return std::nullopt;
  return *interval_start_ + interval_;
}

uint64_t RefusalReport::pending() const {
  uint64_t n = others_.in_interval;
  for (const auto& [address, t] : by_address_) n += t.in_interval;
  return n;
}

std::string RefusalReport::Summary(std::string_view from, const Tally& t,
                                   Clock::time_point now) const {
  char elapsed[32];
  std::snprintf(elapsed, sizeof(elapsed), "%.1f",
                std::chrono::duration<double>(now - *interval_start_).count());
  return "refused " + std::to_string(t.in_interval) + " unauthenticated connection" +
         (t.in_interval == 1 ? "" : "s") + " from " + std::string(from) + " (" +
         std::to_string(t.total) + " in total) in the last " + elapsed + " s; latest: " +
         t.latest_reason;
}

std::vector<std::string> RefusalReport::Flush(Clock::time_point now, bool final) {
  std::vector<std::string> lines;
  if (!interval_start_ || (!final && now < *interval_start_ + interval_)) return lines;
  auto needs_line = [](const Tally& t) {
    return t.in_interval > (t.logged_in_interval ? 1u : 0u);
  };
  for (auto it = by_address_.begin(); it != by_address_.end();) {
    Tally& t = it->second;
    if (needs_line(t)) lines.push_back(Summary(it->first, t, now));
    if (t.in_interval == 0) {
      it = by_address_.erase(it);  // quiet for a whole interval: the episode is over
      continue;
    }
    t.in_interval = 0;
    t.logged_in_interval = false;
    ++it;
  }
  if (needs_line(others_)) lines.push_back(Summary("other addresses", others_, now));
  if (others_.in_interval == 0) {
    others_ = Tally{};
  } else {
    others_.in_interval = 0;
    others_.logged_in_interval = false;
  }
  // Keep an interval open while an address is tracked, so that a quiet one is forgotten next.
  if (by_address_.empty() && others_.total == 0) {
    interval_start_.reset();
  } else {
    interval_start_ = now;
  }
  return lines;
}

}  // namespace dslaunch
