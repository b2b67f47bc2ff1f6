// InMemoryOptimizerStateStore on its own (no communicator): sub-group visits cover the owned
// slice in order with each optimizer's tensors, an update made sub-group by sub-group has the bits
// of one whole update, and owning and borrowing master weights count their bytes apart.
#include "runtime/engine/optimizer_state_store.h"

#include <doctest/doctest.h>

#include <cstring>
#include <vector>

namespace dslaunch::runtime {
namespace {

std::vector<float> Ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * (static_cast<float>(i % 7) - 3.1f);
  return v;
}

bool SameBits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

OptimizerParams Optimizer(OptimizerKind kind, double momentum = 0.0) {
  OptimizerParams p;
  p.kind = kind;
  p.weight_decay = 0.1;
  p.momentum = momentum;
  return p;
}

TEST_CASE("Sub-group visits cover the owned slice in order, with the tensors each optimizer keeps") {
  struct Case {
    OptimizerParams optimizer;
    size_t tensors;
  };
  for (const Case& c : {Case{Optimizer(OptimizerKind::kAdamW), 3}, Case{Optimizer(OptimizerKind::kSgd, 0.9), 2},
                        Case{Optimizer(OptimizerKind::kSgd), 1}}) {
    CAPTURE(c.tensors);
    auto store = InMemoryOptimizerStateStore::Owning(c.optimizer, Ramp(10, 1.0f), /*sub_group_size=*/4);
    std::vector<size_t> begins, sizes;
    REQUIRE(store->ForEachSubGroup(StateAccess::kRead, [&](const StateSubGroup& sub) {
      begins.push_back(sub.begin);
      sizes.push_back(sub.size());
      CHECK(sub.tensors.size() == c.tensors);
      for (const auto& t : sub.tensors) CHECK(t.size() == sub.size());
      return Status::Ok();
    }).ok());
    CHECK(begins == std::vector<size_t>{0, 4, 8});
    CHECK(sizes == std::vector<size_t>{4, 4, 2});
    CHECK(store->Resident().size() == c.tensors);
    CHECK(store->Resident().size() == StateTensorNames(c.optimizer).size());
  }
}

TEST_CASE("An empty owned slice is one empty sub-group, so the visitor still runs") {
  auto store = InMemoryOptimizerStateStore::Owning(Optimizer(OptimizerKind::kAdam), {});
  int visits = 0;
  REQUIRE(store->ForEachSubGroup(StateAccess::kWrite, [&](const StateSubGroup& sub) {
    ++visits;
    CHECK(sub.size() == 0);
    return Status::Ok();
  }).ok());
  CHECK(visits == 1);
}

TEST_CASE("A visitor's failure stops the visit and is returned") {
  auto store = InMemoryOptimizerStateStore::Owning(Optimizer(OptimizerKind::kAdamW), Ramp(10, 1.0f), 3);
  int visits = 0;
  Status s = store->ForEachSubGroup(StateAccess::kReadWrite, [&](const StateSubGroup& sub) {
    ++visits;
    return sub.begin == 3 ? DataLossError("bad sub-group") : Status::Ok();
  });
  CHECK(s.code() == StatusCode::kDataLoss);
  CHECK(visits == 2);
}

TEST_CASE("An update made sub-group by sub-group has the bits of one whole update, for every optimizer") {
  const size_t n = 23;
  // Decay on [0, 9) and [14, 23), not on [9, 14): sub-groups of 5 cut through the segments.
  const std::vector<DecaySegment> segments = {{0, 9, true}, {9, 14, false}, {14, 23, true}};
  for (const OptimizerParams& optimizer : {Optimizer(OptimizerKind::kAdamW), Optimizer(OptimizerKind::kAdam),
                                           Optimizer(OptimizerKind::kSgd, 0.9)}) {
    CAPTURE(static_cast<int>(optimizer.kind));
    std::vector<float> whole_params = Ramp(n, 0.1f);
    OptimizerState whole = OptimizerState::For(optimizer, n);
    auto store = InMemoryOptimizerStateStore::Owning(optimizer, Ramp(n, 0.1f), /*sub_group_size=*/5);
    for (int step = 0; step < 3; ++step) {
      const std::vector<float> grads = Ramp(n, 0.01f * static_cast<float>(step + 1));
      OptimizerStep(optimizer, 1e-2, whole_params, grads, segments, whole);
      const int64_t t = store->step() + 1;
      REQUIRE(store->ForEachSubGroup(StateAccess::kReadWrite, [&](const StateSubGroup& sub) {
        OptimizerUpdate(optimizer, 1e-2, t, sub.master(), std::span<const float>(grads).subspan(sub.begin, sub.size()),
                        SegmentsWithin(segments, sub.begin, sub.begin + sub.size()), sub.m(), sub.v());
        return Status::Ok();
      }).ok());
      store->set_step(t);
    }
    const std::vector<std::span<const float>> state = store->Resident();
    CHECK(SameBits(state[0], whole_params));
    CHECK(SameBits(state[1], whole.m));
    if (optimizer.kind != OptimizerKind::kSgd) CHECK(SameBits(state[2], whole.v));
    CHECK(store->step() == whole.step);
  }
}

TEST_CASE("SegmentsWithin cuts the decay segments to a slice and shifts them to its start") {
  const std::vector<DecaySegment> segments = {{0, 9, true}, {9, 14, false}, {14, 23, true}};
  const std::vector<DecaySegment> cut = SegmentsWithin(segments, 5, 15);
  REQUIRE(cut.size() == 3);
  CHECK((cut[0].begin == 0 && cut[0].end == 4 && cut[0].decay));
  CHECK((cut[1].begin == 4 && cut[1].end == 9 && !cut[1].decay));
  CHECK((cut[2].begin == 9 && cut[2].end == 10 && cut[2].decay));
  CHECK(SegmentsWithin(segments, 23, 23).empty());
}

TEST_CASE("A borrowing store updates the borrowed master weights in place and counts only its moments") {
  std::vector<float> params = Ramp(8, 1.0f);
  const OptimizerParams adam = Optimizer(OptimizerKind::kAdamW);
  auto borrowing = InMemoryOptimizerStateStore::Borrowing(adam, params);
  auto owning = InMemoryOptimizerStateStore::Owning(adam, Ramp(8, 1.0f));
  CHECK(borrowing->bytes() == 8 * 2 * sizeof(float));  // m and v
  CHECK(owning->bytes() == 8 * 3 * sizeof(float));     // and the master weights
  REQUIRE(borrowing->ForEachSubGroup(StateAccess::kReadWrite, [&](const StateSubGroup& sub) {
    CHECK(sub.master().data() == params.data());
    sub.master()[0] = 42.0f;
    return Status::Ok();
  }).ok());
  CHECK(params[0] == 42.0f);
  CHECK(borrowing->Resident()[0].data() == params.data());
}

}  // namespace
}  // namespace dslaunch::runtime
