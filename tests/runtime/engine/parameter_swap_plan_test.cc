// PlanParameterSwap (runtime/engine/parameter_swap.h): which owned parts stay in memory under
// max_in_cpu and which go to records of the swap file. Pure.
#include <doctest/doctest.h>

#include "runtime/engine/parameter_swap.h"

namespace dslaunch::runtime {
namespace {

// Groups of 10, 3 (persistent under a threshold of 5), 20 and 8 elements: 41 in all.
ParameterLayout FourGroups() {
  ParameterLayout layout;
  layout.BeginGroup("a");
  layout.Add("a.w", {10}, true);
  layout.BeginGroup("p");
  layout.Add("p.b", {3}, false);
  layout.BeginGroup("b");
  layout.Add("b.w", {20}, true);
  layout.BeginGroup("c");
  layout.Add("c.w", {8}, true);
  return layout;
}

TEST_CASE("PlanParameterSwap keeps the first groups up to max_in_cpu and persistent groups in memory") {
  const ParameterLayout layout = FourGroups();
  const ShardMap one(layout.numel(), 1, 0, true);  // one rank owns everything
  struct Case {
    uint64_t max_in_cpu;
    std::vector<int> record;
    size_t record_elements;
    size_t resident;
  };
  const Case cases[] = {
      {0, {0, -1, 1, 2}, 20, 3},       // everything but the persistent group on disk
      {10, {-1, -1, 0, 1}, 20, 13},    // "a" fits exactly
      {29, {-1, -1, 0, 1}, 20, 13},    // "b" does not fit, so "c" (which would) goes to disk too
      {30, {-1, -1, -1, 0}, 8, 33},    // persistent "p" does not count against the bound
      {1000, {-1, -1, -1, -1}, 0, 41},  // nothing on disk: no file
  };
  for (const Case& c : cases) {
    CAPTURE(c.max_in_cpu);
    const ParameterSwapPlan plan = PlanParameterSwap(layout, one, 5, c.max_in_cpu);
    CHECK(plan.record == c.record);
    CHECK(plan.record_elements == c.record_elements);
    CHECK(plan.resident_elements == c.resident);
    size_t on_disk = 0;
    for (int r : plan.record) on_disk += r >= 0;
    CHECK(plan.record_count == on_disk);
  }
}

TEST_CASE("PlanParameterSwap counts each rank's owned part, and a group it owns nothing of needs no record") {
  const ParameterLayout layout = FourGroups();
  // Two ranks: rank 0 owns [0, 21): a, p and 8 of b; rank 1 owns [21, 41): 12 of b and c.
  const ShardMap rank0(layout.numel(), 2, 0, true), rank1(layout.numel(), 2, 1, true);
  const ParameterSwapPlan p0 = PlanParameterSwap(layout, rank0, 5, 0);
  CHECK(p0.record == std::vector<int>{0, -1, 1, -1});
  CHECK(p0.record_elements == 10);
  const ParameterSwapPlan p1 = PlanParameterSwap(layout, rank1, 5, 12);
  CHECK(p1.record == std::vector<int>{-1, -1, -1, 0});
  CHECK(p1.record_elements == 8);
  CHECK(p1.resident_elements == 12);
}

}  // namespace
}  // namespace dslaunch::runtime
