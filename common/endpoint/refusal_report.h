// Turns refused unauthenticated connections into a bounded number of log lines, however many
// connections and source addresses there are: the first refusal of an episode is logged at once,
// with its reason; every later one is only counted, and one summary line per interval reports the
// count, how many addresses it came from and the addresses with the most:
//
//   refused an unauthenticated connection from 10.0.0.7: 64 connections from this address are in
//     their handshake already (further refusals are counted and reported every 10 s)
//   refused 8123 unauthenticated connections from 10.0.0.7 (24410 in total) in the last 10.0 s;
//     latest: 64 connections from this address are in their handshake already
//   refused 40000 unauthenticated connections from 5000 addresses (40000 in total) in the last
//     10.0 s, most from 10.0.0.7 (120), 10.0.0.9 (80), 10.0.3.1 (75); latest: ...
//
// "In total" counts from the episode's first refusal; an interval with no refusal ends the
// episode (the next refusal is logged at once again). At most `max_addresses` addresses are
// counted by name per interval (the count of the rest is still in the total and the number of
// addresses is then a lower bound, "at least"), so memory stays bounded. So at a flood or a
// rendezvous of 100k ranks refused for a while, the log gets one line at once and one line per
// interval. Pure: time is an argument. Not thread-safe. docs/protocol.md, "Connections before
// authentication".
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dslaunch {

// One summary per this interval: a flood of 13,000 connections a second costs a line every 10 s,
// and a person reading the log still sees a flood within seconds.
inline constexpr std::chrono::seconds kRefusalReportInterval{10};
// Addresses counted by name per interval: enough to name the worst ones of a flood from many
// hosts, a few hundred KB at most.
inline constexpr size_t kMaxReportedAddresses = 4096;
// Addresses a summary names, the ones with the most refusals.
inline constexpr size_t kNamedAddressesPerSummary = 3;

class RefusalReport {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RefusalReport(Clock::duration interval = kRefusalReportInterval,
                         size_t max_addresses = kMaxReportedAddresses)
      : interval_(interval), max_addresses_(max_addresses) {}

  // Counts one refused connection from `address` for `reason`. Returns the line to log now when
  // it is the first refusal of an episode (see above), std::nullopt when it is only counted.
  std::optional<std::string> Record(const std::string& address, std::string_view reason,
                                    Clock::time_point now);

  // When Flush() has something to do: the end of the current interval, or std::nullopt when no
  // episode is open.
  std::optional<Clock::time_point> due() const;

  // If the interval has ended by `now` (or always, when `final`): the interval's summary line
  // (none when its only refusal was the one logged at once, or when there was none, which ends
  // the episode), then a new interval starts at `now`.
  std::vector<std::string> Flush(Clock::time_point now, bool final = false);

  // Refusals counted since the last flush.
  uint64_t pending() const { return in_interval_; }

 private:
  std::string Summary(Clock::time_point now) const;

  Clock::duration interval_;
  size_t max_addresses_;
  std::optional<Clock::time_point> interval_start_;  // set while an episode is open
  uint64_t in_interval_ = 0;
  uint64_t total_ = 0;  // since the episode's first refusal
  bool logged_in_interval_ = false;  // this interval's first refusal was logged at once
  bool addresses_overflowed_ = false;  // more than max_addresses_ addresses this interval
  std::unordered_map<std::string, uint64_t> by_address_;  // this interval
  std::string latest_reason_;
};

}  // namespace dslaunch
