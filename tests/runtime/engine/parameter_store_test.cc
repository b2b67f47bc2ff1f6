// ParameterStore on its own, with the in-process communicator: what Acquire hands out and which
// all-gathers it makes (ZeRO 3 fetch and prefetch), and Publish of the owners' updated values.
#include "runtime/engine/parameter_store.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "runtime/core/sixteen_bit_float.h"
#include "tests/fakes/engine_on_threads.h"
#include "tests/fakes/recording_communicator.h"

namespace dslaunch::runtime {
namespace {

using testing::OddLayout;  // groups a [0, 21), b [21, 36), c [36, 41)

// Small multiples of 1/8: exact in fp16 and bf16.
std::vector<float> Values(size_t n, float shift = 0.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 16) / 8.0f - 1.0f + shift;
  return v;
}

std::vector<float> Slice(const std::vector<float>& v, const ParameterGroup& g) {
  return {v.begin() + static_cast<std::ptrdiff_t>(g.offset), v.begin() + static_cast<std::ptrdiff_t>(g.offset + g.numel)};
}

std::vector<float> Copy(std::span<const float> s) { return {s.begin(), s.end()}; }

// The parts a store needs, for one rank.
struct Parts {
  Parts(const ParameterLayout& layout, Communicator& comm, bool partitioned_state)
      : shards(layout.numel(), comm.world_size(), comm.rank(), partitioned_state) {}
  ShardMap shards;
  ScratchBuffers scratch;
  DeferredStatus deferred;
};

TEST_CASE("Without partitioned parameters, fp32 Acquire hands out the parameters themselves, with no collective") {
  const ParameterLayout layout = OddLayout();
  const std::vector<float> initial = Values(layout.numel());
  testing::OnEveryRankComm(2, [&](int, Communicator& comm) {
    testing::RecordingCommunicator rec(comm);
    Parts parts(layout, rec, /*partitioned_state=*/true);
    ParameterStore<float> store(layout, rec, ZeroConfig{}, /*partitioned=*/false, parts.shards, parts.scratch,
                                parts.deferred, InitialValuesIn(initial));
    for (int g = 0; g < 3; ++g) {
      std::span<const float> p = store.Acquire(g);
      CHECK(Copy(p) == Slice(initial, layout.groups()[static_cast<size_t>(g)]));
      store.Release(g);
    }
    CHECK(rec.calls().empty());
    CHECK(parts.scratch.peak() == 0);  // nothing copied
    CHECK(store.bytes() == layout.numel() * sizeof(float));
  });
}

TEST_CASE("A partitioned store all-gathers a group on Acquire, with the next groups that fit the prefetch bucket") {
  const ParameterLayout layout = OddLayout();
  const std::vector<float> initial = Values(layout.numel());
  ZeroConfig zero;
  zero.stage3_prefetch_bucket_size = 36;       // a (21) and b (15) in one all-gather
  zero.stage3_param_persistence_threshold = 5;  // c stays whole on every rank
  testing::OnEveryRankComm(3, [&](int, Communicator& comm) {
    testing::RecordingCommunicator rec(comm);
    Parts parts(layout, rec, true);
    ParameterStore<Half> store(layout, rec, zero, /*partitioned=*/true, parts.shards, parts.scratch, parts.deferred,
                               InitialValuesIn(initial));
    // Forward: a fetches a and b together; b and the persistent c need no collective.
    for (int g = 0; g < 3; ++g) {
      CHECK(Copy(store.Acquire(g)) == Slice(initial, layout.groups()[static_cast<size_t>(g)]));
      store.Release(g);
    }
    CHECK(rec.calls() == std::vector<std::string>{"all_gather fp16 [14,14,8]"});
    // Backward: b (below the last acquired c) fetches b and a, downwards, in one collective.
    rec.Clear();
    for (int g = 2; g >= 0; --g) {
      CHECK(Copy(store.Acquire(g)) == Slice(initial, layout.groups()[static_cast<size_t>(g)]));
      store.Release(g);
    }
    CHECK(rec.calls() == std::vector<std::string>{"all_gather fp16 [14,14,8]"});
    // Held: the owned slice (14, 14 or 13 elements) and c, in fp16.
    CHECK(store.bytes() == (parts.shards.own().size() + 5) * sizeof(Half));
    CHECK(parts.deferred.status().ok());
  });
}

TEST_CASE("Groups fetched ahead and never acquired are dropped, so the next Acquire fetches them again") {
  const ParameterLayout layout = OddLayout();
  const std::vector<float> initial = Values(layout.numel());
  ZeroConfig zero;
  zero.stage3_prefetch_bucket_size = 41;
  zero.stage3_param_persistence_threshold = 0;
  testing::OnEveryRankComm(2, [&](int, Communicator& comm) {
    testing::RecordingCommunicator rec(comm);
    Parts parts(layout, rec, true);
    ParameterStore<float> store(layout, rec, zero, true, parts.shards, parts.scratch, parts.deferred,
                                InitialValuesIn(initial));
    (void)store.Acquire(0);  // fetches a, b and c
    store.Release(0);
    store.DropPrefetched();
    CHECK(Copy(store.Acquire(1)) == Slice(initial, layout.groups()[1]));
    store.Release(1);
    CHECK(rec.calls() == std::vector<std::string>{"all_gather fp32 [21,20]", "all_gather fp32 [0,20]"});
  });
}

// Each rank writes its owned slice shifted by +1; after Publish every rank reads the new values.
template <class S>
void CheckPublish(bool partitioned, std::vector<std::string> expected_calls) {
  const ParameterLayout layout = OddLayout();
  const std::vector<float> initial = Values(layout.numel());
  const std::vector<float> updated = Values(layout.numel(), 1.0f);
  ZeroConfig zero;
  zero.allgather_bucket_size = 30;
  zero.stage3_param_persistence_threshold = 5;
  testing::OnEveryRankComm(3, [&](int, Communicator& comm) {
    testing::RecordingCommunicator rec(comm);
    Parts parts(layout, rec, true);
    ParameterStore<S> store(layout, rec, zero, partitioned, parts.shards, parts.scratch, parts.deferred,
                            InitialValuesIn(initial));
    const ShardRange own = parts.shards.own();
    REQUIRE(store.Owned().size() == own.size());
    const std::vector<float> mine(updated.begin() + static_cast<std::ptrdiff_t>(own.begin),
                                  updated.begin() + static_cast<std::ptrdiff_t>(own.end));
    store.WriteOwned(0, std::span<const float>(mine).first(5));  // in two pieces, as sub-groups
    store.WriteOwned(5, std::span<const float>(mine).subspan(5));
    REQUIRE(store.Publish().ok());
    for (int g = 0; g < 3; ++g) {
      CHECK(Copy(store.Acquire(g)) == Slice(updated, layout.groups()[static_cast<size_t>(g)]));
      store.Release(g);
    }
    CHECK(rec.calls() == expected_calls);
  });
}

TEST_CASE("Publish all-gathers the owners' values into the whole parameters when only the state is partitioned") {
  // Chunks of allgather_bucket_size: [0, 30) and [30, 41); then no collective on Acquire.
  CheckPublish<float>(false, {"all_gather fp32 [14,14,2]", "all_gather fp32 [0,0,11]"});
  CheckPublish<BFloat16>(false, {"all_gather bf16 [14,14,2]", "all_gather bf16 [0,0,11]"});
}

TEST_CASE("Publish refreshes the persistent groups when parameters are partitioned; the rest is fetched on Acquire") {
  // Publish: c; then Acquire a gathers a and b (the prefetch default is large).
  CheckPublish<float>(true, {"all_gather fp32 [0,0,5]", "all_gather fp32 [14,14,8]"});
  CheckPublish<Half>(true, {"all_gather fp16 [0,0,5]", "all_gather fp16 [14,14,8]"});
}

}  // namespace
}  // namespace dslaunch::runtime
