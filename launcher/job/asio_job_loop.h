// AsioJobLoop: the real JobLoop (job_loop.h), one Boost.Asio io_context run on the thread that
// calls Run(), and the runner's signals. The only translation unit of launcher/job/ that includes
// Asio is its .cc: the endpoint and the store service take the io_context by reference (io()).
//
// Threading: as JobLoop; OnNextSignal and Run on the loop's thread (Run is that thread).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "launcher/job/job_loop.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace dslaunch::launcher {

class AsioJobLoop final : public JobLoop {
 public:
  // Catches `signals` from now on (their default action no longer happens): they are reported
  // through OnNextSignal.
  explicit AsioJobLoop(const std::vector<int>& signals);
  ~AsioJobLoop() override;
  AsioJobLoop(const AsioJobLoop&) = delete;
  AsioJobLoop& operator=(const AsioJobLoop&) = delete;

  // For the endpoint and the store service, which run on this loop.
  boost::asio::io_context& io();
  // Runs the loop until Stop() (returns at once when it was stopped before).
  void Run();
  // Calls `on_signal` on the loop's thread with the next caught signal, once.
  void OnNextSignal(std::function<void(int)> on_signal);

  SteadyClock::time_point Now() const override;
  int64_t UnixMillis() const override;
  std::unique_ptr<JobTimer> NewTimer() override;
  void Post(std::function<void()> work) override;
  void Stop() override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dslaunch::launcher
