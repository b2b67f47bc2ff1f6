// Turns refused unauthenticated connections into a bounded number of log lines: the first
// refusal from an address is logged at once, with its reason; every later one is only counted,
// and one summary line per address and interval reports the count:
//
//   refused an unauthenticated connection from 10.0.0.7: 64 connections from this address are in
//     their handshake already (further refusals from 10.0.0.7 are counted and reported every 10 s)
//   refused 8123 unauthenticated connections from 10.0.0.7 (24410 in total) in the last 10.0 s;
//     latest: 64 connections from this address are in their handshake already
//
// "In total" counts from the address's first logged refusal; an address with no refusal for a
// whole interval starts over (its next refusal is logged at once again). At most `max_addresses`
// addresses are reported by name per interval; refusals from further addresses are summed in one
// line, so the memory used stays bounded whatever the number of addresses. Pure: time is an
// argument. Not thread-safe. docs/protocol.md, "Connections before authentication".
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dslaunch {

// One summary per address per this interval: a flood of 13,000 connections a second costs a
// line every 10 s, and a person reading the log still sees a flood within seconds.
inline constexpr std::chrono::seconds kRefusalReportInterval{10};
// Addresses reported by name per interval; the rest are summed in one line.
inline constexpr size_t kMaxReportedAddresses = 32;

class RefusalReport {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RefusalReport(Clock::duration interval = kRefusalReportInterval,
                         size_t max_addresses = kMaxReportedAddresses)
      : interval_(interval), max_addresses_(max_addresses) {}

  // Counts one refused connection from `address` for `reason`. Returns the line to log now when
  // it is the first refusal from the address (see above), std::nullopt when it is only counted.
  std::optional<std::string> Record(const std::string& address, std::string_view reason,
                                    Clock::time_point now);

  // When Flush() has something to do: the end of the current interval, or std::nullopt when
  // nothing has been counted since the last flush and no address is being tracked.
  std::optional<Clock::time_point> due() const;

  // If the interval has ended by `now` (or always, when `final`): the summary lines of the
  // interval, then a new interval starts at `now`. Addresses with no refusal in the interval
  // are forgotten. An address whose only refusal in the interval was the one logged at once
  // gets no summary line.
  std::vector<std::string> Flush(Clock::time_point now, bool final = false);

  // Refusals counted since the last flush, from every address.
  uint64_t pending() const;

 private:
  struct Tally {
    uint64_t in_interval = 0;
    uint64_t total = 0;
    bool logged_in_interval = false;  // this interval's first refusal was logged at once
    std::string latest_reason;
  };
  std::string Summary(std::string_view from, const Tally& t, Clock::time_point now) const;

  Clock::duration interval_;
  size_t max_addresses_;
  std::optional<Clock::time_point> interval_start_;
  std::map<std::string, Tally> by_address_;
  Tally others_;  // refusals from addresses beyond max_addresses_
};

}  // namespace dslaunch
