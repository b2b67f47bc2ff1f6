// JobLoop: the job runner's event loop as its parts see it: the time, one-shot timers, work posted
// from other threads, and the end of the loop. The runner's parts (agent_fleet.h, join_phase.h,
// status_feed.h) take a JobLoop& instead of an Asio io_context, so that Asio stays in one
// translation unit (asio_job_loop.cc, the real loop) and a test drives a part with a fake loop
// whose clock and timers it moves by hand (tests/fakes/fake_job_loop.h).
//
// Threading: every method but Post is called on the loop's thread, and every callback runs there.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace dslaunch::launcher {

using SteadyClock = std::chrono::steady_clock;

// One re-armable one-shot timer of a JobLoop. Arming it again, or Cancel(), drops the pending
// callback unrun, unless it is already due and queued to run (the loop's thread then runs it: a
// callback checks the state it acts on, as every timer callback of the runner does). Destroying
// the timer cancels it.
class JobTimer {
 public:
  virtual ~JobTimer() = default;
  // Runs `fire` on the loop's thread at `when` (at once if that has passed).
  virtual void At(SteadyClock::time_point when, std::function<void()> fire) = 0;
  // Runs `fire` on the loop's thread after `delay` from now.
  virtual void After(std::chrono::milliseconds delay, std::function<void()> fire) = 0;
  virtual void Cancel() = 0;
};

class JobLoop {
 public:
  virtual ~JobLoop() = default;
  // The monotonic time (timeouts, heartbeats) and the wall clock in Unix milliseconds (what the
  // status view and the events file show).
  virtual SteadyClock::time_point Now() const = 0;
  virtual int64_t UnixMillis() const = 0;
  virtual std::unique_ptr<JobTimer> NewTimer() = 0;
  // Runs `work` on the loop's thread soon. Thread-safe: the starter's reporting threads and the
  // re-probes use it. Work posted after Stop() may never run.
  virtual void Post(std::function<void()> work) = 0;
  // Ends the loop: the runner's Run() returns; nothing more runs on it.
  virtual void Stop() = 0;
};

}  // namespace dslaunch::launcher
