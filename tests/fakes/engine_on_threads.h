// Engines on in-process ranks: one Engine per thread over a ThreadCommunicatorGroup, for the
// engine tests.
#pragma once

#include <chrono>
#include <span>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "runtime/engine/engine.h"
#include "tests/fakes/thread_communicator.h"

namespace dslaunch::runtime::testing {

// 41 elements in three groups, decayed weights and an undecayed bias; sizes that do not divide by
// 2, 3 or 4, so partitions cut through tensors.
inline ParameterLayout OddLayout() {
  ParameterLayout layout;
  layout.BeginGroup("a");
  layout.Add("a.w", {3, 7}, true);
  layout.BeginGroup("b");
  layout.Add("b.w", {13}, true);
  layout.Add("b.b", {2}, false);
  layout.BeginGroup("c");
  layout.Add("c.w", {5}, true);
  return layout;
}

// Runs `body(rank, comm)` on `world` threads, each with its rank's communicator of one group: for
// tests of the engine's parts (parameter store, gradient reducer) on their own.
template <class Body>
void OnEveryRankComm(int world, Body body) {
  ThreadCommunicatorGroup group(world, std::chrono::seconds(10));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back([&, r] { body(r, group.Get(r)); });
  for (auto& t : threads) t.join();
}

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
