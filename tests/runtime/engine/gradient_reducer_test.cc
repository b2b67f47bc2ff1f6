// GradientReducer on its own, with the in-process communicator: the step's gradient is each
// rank's slice of the average over ranks and micro-steps, by all-reduce at the step, or
// reduce-scatters during backward, in fp32 and 16-bit storage, with the collectives run at once
// or on a queue's thread (overlap_comm); which collectives each makes.
#include "runtime/engine/gradient_reducer.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/core/sixteen_bit_float.h"
#include "tests/fakes/engine_on_threads.h"
#include "tests/fakes/recording_communicator.h"

namespace dslaunch::runtime {
namespace {

using testing::OddLayout;  // groups a [0, 21), b [21, 36), c [36, 41)

// Rank r's gradient of element i in micro-step m: small integers, so that every sum and the
// average over 3 ranks (x (1 + 2 + 3) / 3 = x 2) are exact in fp32, fp16 and bf16.
float RankGradient(size_t i, int rank, int micro) { return static_cast<float>((i % 5 + 1) * (rank + 1) * (micro + 1)); }
// Averaged over ranks 0-2 and summed over micro-steps 0-1: (i % 5 + 1) x 2 x (1 + 2).
float Expected(size_t i) { return static_cast<float>((i % 5 + 1) * 2 * 3); }

// Two micro-steps of a backward pass: the groups from last to first, each reported ready.
template <class S>
void Backward(GradientReducer<S>& reducer, const ParameterLayout& layout, int rank) {
  for (int m = 0; m < 2; ++m) {
    for (int g = 2; g >= 0; --g) {
      std::span<float> grad = reducer.Gradient(g);
      const size_t offset = layout.groups()[static_cast<size_t>(g)].offset;
      for (size_t j = 0; j < grad.size(); ++j) grad[j] += RankGradient(offset + j, rank, m);
      reducer.GradientReady(g);
    }
  }
}

// Runs a step's reduction on 3 ranks at `stage`, checks each rank's step gradient, and returns
// rank 0's collectives.
template <class S>
std::vector<std::string> ReduceOnThreeRanks(int stage, bool overlap = false) {
  const ParameterLayout layout = OddLayout();
  const ZeroPartitioning partitioning = PartitioningFor(stage);
  ZeroConfig zero;
  zero.reduce_bucket_size = 16;  // below the largest group (21): buckets and chunks of 21
  std::vector<std::string> calls;
  testing::OnEveryRankComm(3, [&](int rank, Communicator& comm) {
    testing::RecordingCommunicator rec(comm);
    ShardMap shards(layout.numel(), 3, rank, partitioning.optimizer_state);
    ScratchBuffers scratch;
    DeferredStatus deferred;
    CollectiveQueue queue(overlap);
    GradientReducer<S> reducer(layout, rec, zero, partitioning.gradients, shards, scratch, deferred, queue);
    reducer.BeginStep(2);
    Backward(reducer, layout, rank);
    reducer.Finish();
    reducer.CheckAllReady();
    REQUIRE(deferred.status().ok());
    Result<StepGradient> step = reducer.ReduceForStep();
    REQUIRE(step.ok());
    REQUIRE(step->size() == shards.own().size());
    // Read in ranges of 4 (the last one shorter), as the optimizer's sub-groups read it.
    for (size_t begin = 0; begin < step->size(); begin += 4) {
      const size_t count = std::min<size_t>(4, step->size() - begin);
      const std::span<float> values = step->Range(begin, count, scratch);
      for (size_t i = 0; i < count; ++i) {
        CAPTURE(begin + i);
        CHECK(values[i] == Expected(shards.own().begin + begin + i));
      }
    }
    double want = 0.0;
    for (size_t i = 0; i < layout.numel(); ++i) want += static_cast<double>(Expected(i)) * Expected(i);
    Result<double> sum = reducer.GlobalSumOfSquares(*step);
    step->Release(scratch);
    REQUIRE(sum.ok());
    CHECK(*sum == want);
    const size_t kept = partitioning.gradients ? shards.own().size() : layout.numel();
    CHECK(reducer.bytes() == kept * sizeof(S));
    if (rank == 0) calls = rec.calls();
  });
  return calls;
}

TEST_CASE("Stage 0 all-reduces the whole accumulated gradient at the step, in chunks") {
  const std::vector<std::string> fp32 = {"all_reduce avg fp32 21", "all_reduce avg fp32 20"};
  CHECK(ReduceOnThreeRanks<float>(0) == fp32);
  CHECK(ReduceOnThreeRanks<Half>(0) == fp32);  // 16-bit is reduced in fp32
}

TEST_CASE("Stage 1 reduce-scatters the whole gradient into the owned slice in the last backward, then sums the norm") {
  // Only in the second micro-step: c and b as one run (20 <= 21 elements), then a.
  const std::vector<std::string> calls = {"reduce_scatter avg fp32 [0,7,13]", "reduce_scatter avg fp32 [14,7,0]",
                                          "all_reduce sum fp32 1"};
  CHECK(ReduceOnThreeRanks<float>(1) == calls);
  CHECK(ReduceOnThreeRanks<BFloat16>(1) == calls);
}

TEST_CASE("Stages 2-3 reduce-scatter buckets during backward and keep only the owned slice") {
  // Per micro-step: c and b share a bucket (20 <= 21 elements), a does not fit and goes alone as
  // the micro-step's last group. The step itself only sums the norm.
  const std::vector<std::string> micro = {"reduce_scatter avg fp32 [0,7,13]", "reduce_scatter avg fp32 [14,7,0]"};
  std::vector<std::string> calls = micro;
  calls.insert(calls.end(), micro.begin(), micro.end());
  calls.push_back("all_reduce sum fp32 1");
  CHECK(ReduceOnThreeRanks<float>(2) == calls);
  CHECK(ReduceOnThreeRanks<Half>(3) == calls);
}

TEST_CASE("With overlap_comm the same reductions run on the queue's thread: the same collectives and gradients") {
  for (int stage : {1, 2, 3}) {
    CAPTURE(stage);
    CHECK(ReduceOnThreeRanks<float>(stage, true) == ReduceOnThreeRanks<float>(stage));
    CHECK(ReduceOnThreeRanks<Half>(stage, true) == ReduceOnThreeRanks<Half>(stage));
    CHECK(ReduceOnThreeRanks<BFloat16>(stage, true) == ReduceOnThreeRanks<BFloat16>(stage));
  }
}

}  // namespace
}  // namespace dslaunch::runtime
