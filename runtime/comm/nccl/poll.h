// The waiting loop of the NCCL communicator (docs/communicator.md, "Collectives, ordering and
// abort"), apart from CUDA and NCCL so that the unit tier tests it: poll a non-blocking operation
// with back-off until it finishes, fails, is told to abort, or passes its deadline. Waiting this
// way, never inside a blocking CUDA or NCCL call, is what lets a stop end a collective.
//
// Each turn, in this order: `done()` (Result<bool>: true when finished, an error when it failed);
// then `abort_reason()` (non-empty: stop for that reason); then the deadline; then a pause that
// starts at kFirstPollPause and doubles up to kMaxPollPause. So an operation that has finished is
// reported finished even when an abort was asked for meanwhile (the abort applies to the next
// one), and an abort is seen at most one pause after it was asked for.
//
// The clock is a parameter (steady_clock and this_thread::sleep_for in the communicator, a fake
// in the tests): `clock.now()` and `clock.sleep_for(duration)`.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>

#include "common/status.h"

namespace dslaunch::runtime {

// A small collective finishes in microseconds: look again soon.
inline constexpr std::chrono::microseconds kFirstPollPause{20};
// An idle wait stays cheap and an abort is still seen within 2 ms.
inline constexpr std::chrono::microseconds kMaxPollPause{2000};

struct PollOutcome {
  Status status;             // the error `done` returned, when it failed
  std::string abort_reason;  // non-empty: stopped for this reason
  bool timed_out = false;    // the deadline passed first
  bool finished() const { return status.ok() && abort_reason.empty() && !timed_out; }
};

template <typename Clock, typename Done, typename AbortReason>
PollOutcome PollUntil(Clock& clock, Done done, AbortReason abort_reason, typename Clock::time_point deadline) {
  std::chrono::microseconds pause = kFirstPollPause;
  for (;;) {
    Result<bool> finished = done();
    if (!finished.ok()) return {finished.status(), "", false};
    if (*finished) return {};
    if (std::string why = abort_reason(); !why.empty()) return {Status::Ok(), std::move(why), false};
    if (clock.now() >= deadline) return {Status::Ok(), "", true};
    clock.sleep_for(pause);
    pause = std::min(pause * 2, kMaxPollPause);
  }
}

// The real clock of PollUntil.
struct SteadyPollClock {
  using time_point = std::chrono::steady_clock::time_point;
  time_point now() const { return std::chrono::steady_clock::now(); }
  void sleep_for(std::chrono::microseconds d) const;
};

}  // namespace dslaunch::runtime
