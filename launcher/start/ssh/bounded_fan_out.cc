#include "launcher/start/ssh/bounded_fan_out.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace dslaunch::launcher {

size_t BoundedWorkers(size_t count, int limit) {
  return std::min(count, static_cast<size_t>(std::max(limit, 1)));
}

void ForEachBounded(size_t count, int limit, const std::function<void(size_t)>& task) {
  std::atomic<size_t> next{0};
  std::vector<std::jthread> workers;
  const size_t n = BoundedWorkers(count, limit);
  workers.reserve(n);
  for (size_t w = 0; w < n; ++w) {
    workers.emplace_back([&] {
      for (size_t i = next++; i < count; i = next++) task(i);
    });
  }
}  // the jthreads join here

}  // namespace dslaunch::launcher
