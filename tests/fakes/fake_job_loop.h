// FakeJobLoop: a JobLoop (launcher/job/job_loop.h) whose clocks stand still until a test moves
// them: Advance() runs the timers that fall due, earliest first, on the test's thread. Posted work
// (Post is thread-safe, as the real one) waits until RunPosted() runs it on the test's thread. For
// the job runner's parts (agent fleet, join phase, status feed) in unit tests: exact deadlines, no
// sleeps.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "launcher/job/job_loop.h"

namespace dslaunch::launcher {

class FakeJobLoop final : public JobLoop {
 public:
  SteadyClock::time_point now = SteadyClock::time_point{} + std::chrono::hours(1);
  int64_t unix_ms = 1'800'000'000'000;
  bool stopped = false;

  SteadyClock::time_point Now() const override { return now; }
  int64_t UnixMillis() const override { return unix_ms; }
  std::unique_ptr<JobTimer> NewTimer() override { return std::make_unique<Timer>(*this); }
  void Post(std::function<void()> work) override {
    std::lock_guard<std::mutex> lock(mu_);
    posted_.push_back(std::move(work));
    posted_cv_.notify_all();
  }
  void Stop() override { stopped = true; }

  // Moves both clocks by `d`, running each timer due by the new time at its own deadline.
  void Advance(std::chrono::milliseconds d) {
    const SteadyClock::time_point end = now + d;
    while (Timer* t = NextDue(end)) {
      if (t->deadline > now) {  // a timer armed for a time already past runs now
        unix_ms += std::chrono::duration_cast<std::chrono::milliseconds>(t->deadline - now).count();
        now = t->deadline;
      }
      std::function<void()> fire = std::move(t->fire);
      t->fire = nullptr;
      fire();
    }
    unix_ms += std::chrono::duration_cast<std::chrono::milliseconds>(end - now).count();
    now = end;
  }
  // Runs the posted work, in order, until none is left; returns how many ran.
  size_t RunPosted() {
    size_t ran = 0;
    for (;;) {
      std::function<void()> work;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (posted_.empty()) return ran;
        work = std::move(posted_.front());
        posted_.erase(posted_.begin());
      }
      work();
      ++ran;
    }
  }
  // Waits until work was posted (from another thread), at most `deadline`; false if none came.
  bool WaitPosted(std::chrono::milliseconds deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    return posted_cv_.wait_for(lock, deadline, [this] { return !posted_.empty(); });
  }
  // The deadline of the earliest armed timer, if any.
  std::optional<SteadyClock::time_point> NextDeadline() const {
    std::optional<SteadyClock::time_point> next;
    for (const Timer* t : timers_) {
      if (t->fire && (!next || t->deadline < *next)) next = t->deadline;
    }
    return next;
  }
  size_t armed() const {
    return static_cast<size_t>(std::count_if(timers_.begin(), timers_.end(), [](const Timer* t) { return t->fire != nullptr; }));
  }

 private:
  struct Timer final : JobTimer {
    explicit Timer(FakeJobLoop& loop) : loop(loop) { loop.timers_.push_back(this); }
    ~Timer() override { std::erase(loop.timers_, this); }
    void At(SteadyClock::time_point when, std::function<void()> f) override {
      deadline = when;
      fire = std::move(f);
    }
    void After(std::chrono::milliseconds delay, std::function<void()> f) override { At(loop.now + delay, std::move(f)); }
    void Cancel() override { fire = nullptr; }
    FakeJobLoop& loop;
    SteadyClock::time_point deadline{};
    std::function<void()> fire;
  };

  Timer* NextDue(SteadyClock::time_point end) {
    Timer* next = nullptr;
    for (Timer* t : timers_) {
      if (t->fire && t->deadline <= end && (next == nullptr || t->deadline < next->deadline)) next = t;
    }
    return next;
  }

  std::vector<Timer*> timers_;
  std::mutex mu_;
  std::condition_variable posted_cv_;
  std::vector<std::function<void()>> posted_;
};

}  // namespace dslaunch::launcher
