// Heartbeat bookkeeping for one peer: when it was last heard from, and whether it has been silent
// for longer than the timeout. Any message counts as a sign of life. Pure: time is an input.
#pragma once

#include <chrono>

namespace dslaunch {

// How often launcher and agents send HEARTBEAT: often enough that a lost peer is noticed within
// about one interval of the timeout, rare enough to cost nothing (one small frame a second).
inline constexpr std::chrono::milliseconds kHeartbeatInterval{1000};
// Default silence after which a peer counts as lost (--heartbeat_timeout): longer than any pause a
// healthy, loaded node shows, short next to the NCCL timeout (10-30 min) it replaces.
inline constexpr std::chrono::milliseconds kDefaultHeartbeatTimeout{10000};

// True when a periodic check ran at `now` although the previous one ran at `previous_check`, a
// whole `timeout` or more ago: the checking process itself was not running in between (SIGSTOP,
// a frozen VM, a machine under swap). A peer's silence over such a gap is not evidence against the
// peer; the caller gives every peer a fresh timeout instead of declaring it lost.
inline bool CheckerWasSuspended(std::chrono::steady_clock::time_point previous_check,
                                std::chrono::steady_clock::time_point now, std::chrono::milliseconds timeout) {
  return now - previous_check >= timeout;
}

class HeartbeatMonitor {
 public:
  using Clock = std::chrono::steady_clock;

  HeartbeatMonitor(std::chrono::milliseconds timeout, Clock::time_point now)
      : timeout_(timeout), last_heard_(now) {}

  void OnHeard(Clock::time_point now) { last_heard_ = now; }
  bool Expired(Clock::time_point now) const { return now - last_heard_ > timeout_; }
  std::chrono::milliseconds Silence(Clock::time_point now) const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(now - last_heard_);
  }

 private:
  std::chrono::milliseconds timeout_;
  Clock::time_point last_heard_;
};

}  // namespace dslaunch
