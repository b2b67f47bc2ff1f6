// The NCCL communicator's waiting loop (runtime/comm/nccl/poll.h) with a fake clock: no CUDA, no
// NCCL, no sleeping.
#include "runtime/comm/nccl/poll.h"

#include <doctest/doctest.h>

#include <vector>

namespace dslaunch::runtime {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// Time advances only when the loop pauses; every pause is recorded.
struct FakeClock {
  using time_point = std::chrono::steady_clock::time_point;
  time_point t{};
  std::vector<microseconds> pauses;
  time_point now() const { return t; }
  void sleep_for(microseconds d) {
    pauses.push_back(d);
    t += d;
  }
};

TEST_CASE("PollUntil returns once the operation finishes, pausing 20 us, then twice as long each turn up to 2 ms") {
  FakeClock clock;
  int polls = 0;
  PollOutcome out = PollUntil(
      clock, [&]() -> Result<bool> { return ++polls == 10; }, [] { return std::string(); },
      clock.now() + milliseconds(100));
  CHECK(out.finished());
  CHECK(polls == 10);
  const std::vector<microseconds> expected = {microseconds(20),   microseconds(40),   microseconds(80),
                                              microseconds(160),  microseconds(320),  microseconds(640),
                                              microseconds(1280), microseconds(2000), microseconds(2000)};
  CHECK(clock.pauses == expected);
}

TEST_CASE("PollUntil stops at the deadline when the operation never finishes") {
  FakeClock clock;
  const auto deadline = clock.now() + milliseconds(10);
  PollOutcome out = PollUntil(clock, []() -> Result<bool> { return false; }, [] { return std::string(); }, deadline);
  CHECK(out.timed_out);
  CHECK_FALSE(out.finished());
  CHECK(out.status.ok());
  CHECK(clock.now() >= deadline);
  CHECK(clock.now() < deadline + kMaxPollPause);  // it looked again at most one pause after
}

TEST_CASE("PollUntil stops for an abort asked for while it waits, with its reason") {
  FakeClock clock;
  int polls = 0;
  PollOutcome out = PollUntil(
      clock, [&]() -> Result<bool> { ++polls; return false; },
      [&] { return polls >= 3 ? std::string("the worker was told to stop") : std::string(); },
      clock.now() + std::chrono::hours(1));
  CHECK(out.abort_reason == "the worker was told to stop");
  CHECK_FALSE(out.timed_out);
  CHECK(polls == 3);
}

TEST_CASE("PollUntil reports an operation that finished even when an abort came meanwhile") {
  FakeClock clock;
  PollOutcome out = PollUntil(clock, []() -> Result<bool> { return true; }, [] { return std::string("stop"); },
                              clock.now());
  CHECK(out.finished());
  CHECK(clock.pauses.empty());
}

TEST_CASE("PollUntil returns the operation's error at once") {
  FakeClock clock;
  PollOutcome out = PollUntil(
      clock, []() -> Result<bool> { return AbortedError("allreduce: remote process exited (a peer failed or left)"); },
      [] { return std::string("stop"); }, clock.now() + milliseconds(100));
  CHECK(out.status.code() == StatusCode::kAborted);
  CHECK(out.status.message() == "allreduce: remote process exited (a peer failed or left)");
  CHECK(out.abort_reason.empty());
  CHECK(clock.pauses.empty());
}

TEST_CASE("PollUntil with the steady clock returns a finished operation without pausing") {
  SteadyPollClock clock;
  PollOutcome out =
      PollUntil(clock, []() -> Result<bool> { return true; }, [] { return std::string(); }, clock.now());
  CHECK(out.finished());
}

}  // namespace
}  // namespace dslaunch::runtime
