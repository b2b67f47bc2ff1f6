#include "launcher/start/ssh/bounded_fan_out.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace dslaunch::launcher {
namespace {

TEST_CASE("BoundedWorkers is the smaller of the task count and the limit") {
  CHECK(BoundedWorkers(0, 32) == 0);
  CHECK(BoundedWorkers(5, 32) == 5);
  CHECK(BoundedWorkers(12000, 32) == 32);
  CHECK(BoundedWorkers(3, 0) == 1);
  CHECK(BoundedWorkers(3, -4) == 1);
}

TEST_CASE("ForEachBounded runs every task exactly once") {
  for (int limit : {1, 3, 32}) {
    CAPTURE(limit);
    std::vector<std::atomic<int>> calls(100);
    ForEachBounded(calls.size(), limit, [&](size_t i) { ++calls[i]; });
    for (size_t i = 0; i < calls.size(); ++i) CHECK(calls[i].load() == 1);
  }
  ForEachBounded(0, 4, [](size_t) { FAIL("no task for an empty range"); });
}

TEST_CASE("ForEachBounded never has more than the limit of tasks running, and reaches it") {
  // The tasks block at a gate. Once `limit` of them are inside, a correct limiter has no worker
  // left to start another; one with a worker too many starts it at once, which the wait below
  // sees (it only waits out its bound when the limiter is right). Then the gate opens.
  constexpr int kLimit = 4;
  constexpr size_t kTasks = 40;
  std::mutex mu;
  std::condition_variable cv;
  int inside = 0, peak = 0;
  bool open = false;
  size_t done = 0;
  std::thread runner([&] {
    ForEachBounded(kTasks, kLimit, [&](size_t) {
      std::unique_lock lock(mu);
      ++inside;
      peak = std::max(peak, inside);
      cv.notify_all();
      cv.wait(lock, [&] { return open; });
      --inside;
      ++done;
    });
  });
  {
    std::unique_lock lock(mu);
    CHECK(cv.wait_for(lock, std::chrono::seconds(30), [&] { return inside >= kLimit; }));
    CHECK_FALSE(cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return inside > kLimit; }));
    open = true;
    cv.notify_all();
  }
  runner.join();
  CHECK(peak == kLimit);
  CHECK(done == kTasks);
}

TEST_CASE("ForEachBounded with a limit of one runs the tasks in order on one thread") {
  std::vector<size_t> order;
  std::vector<std::thread::id> threads;
  ForEachBounded(10, 1, [&](size_t i) {
    order.push_back(i);
    threads.push_back(std::this_thread::get_id());
  });
  REQUIRE(order.size() == 10);
  for (size_t i = 0; i < order.size(); ++i) CHECK(order[i] == i);
  for (auto id : threads) CHECK(id == threads[0]);
  CHECK(threads[0] != std::this_thread::get_id());
}

}  // namespace
}  // namespace dslaunch::launcher
