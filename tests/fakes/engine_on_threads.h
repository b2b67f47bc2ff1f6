// Engines on in-process ranks: one Engine per thread over a ThreadCommunicatorGroup, for the
// engine tests.
#pragma once

#include <chrono>
#include <span>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "runtime/engine.h"
#include "tests/fakes/thread_communicator.h"

namespace dslaunch::runtime::testing {

// Runs `body(rank, engine)` on `world` threads, each with an engine created from `initial`; a
// failed Create fails the test on that rank.
template <class Body>
void OnEveryRank(int world, const ParameterLayout& layout, const EngineOptions& options,
                 std::span<const float> initial, Body body) {
  ThreadCommunicatorGroup group(world, std::chrono::seconds(10));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto engine = Engine::Create(layout, group.Get(r), options, initial);
      REQUIRE_MESSAGE(engine.ok(), engine.status().ToString());
      body(r, **engine);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace dslaunch::runtime::testing
