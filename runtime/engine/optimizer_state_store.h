// OptimizerStateStore: where the fp32 master weights and the optimizer's moments of the owned
// slice live, and how the step reaches them; the answer to "where does optimizer state live?"
// (docs/engine.md "The engine's three parts").
//
// The step never holds the whole state: it visits it sub-group by sub-group (ForEachSubGroup),
// so that a store that keeps the state in files (ZeRO-Infinity's NVMe offload,
// NvmeOptimizerStateStore) can stream it through a few buffers: read the next sub-group while the
// step updates this one and writes the previous back. InMemoryOptimizerStateStore keeps it in memory; its sub-groups are
// views of its buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/engine/optimizer.h"
#include "runtime/swap/io_engine.h"

namespace dslaunch::runtime {

// The optimizer's fp32 state, by checkpoint tensor name: "master" (the fp32 master weights),
// then the optimizer's buffers ("exp_avg", "exp_avg_sq" for Adam/AdamW; "momentum_buffer" for
// SGD with momentum; none for plain SGD).
std::vector<std::string> StateTensorNames(const OptimizerParams& optimizer);

// What a visit does with a sub-group: a store that keeps the state elsewhere reads it in before
// the visit only when the visitor reads it, and writes it back only when the visitor writes it.
enum class StateAccess { kRead, kWrite, kReadWrite };

// One sub-group of the owned state: elements [begin, begin + size()) of the owned slice.
struct StateSubGroup {
  size_t begin = 0;
  std::vector<std::span<float>> tensors;  // StateTensorNames order, the master weights first

  size_t size() const { return tensors.front().size(); }
  std::span<float> master() const { return tensors.front(); }
  // exp_avg or momentum_buffer; empty when the optimizer keeps none.
  std::span<float> m() const { return tensors.size() > 1 ? tensors[1] : std::span<float>(); }
  // exp_avg_sq; empty unless Adam(W).
  std::span<float> v() const { return tensors.size() > 2 ? tensors[2] : std::span<float>(); }
};

class OptimizerStateStore {
 public:
  using Visitor = std::function<Status(const StateSubGroup&)>;
  virtual ~OptimizerStateStore() = default;

  // Elements of the owned slice.
  virtual size_t size() const = 0;
  // Optimizer updates applied so far (Adam's t); the step sets it after its visit.
  virtual int64_t step() const = 0;
  virtual void set_step(int64_t step) = 0;
  // Visits the owned state in sub-groups, in ascending order, covering it exactly once (an empty
  // slice is one empty sub-group, so that the visitor runs on every rank). The spans
  // are valid only during the call; with kWrite or kReadWrite what the visitor leaves in them is
  // the new state. Stops at the visitor's first failure and returns it (the sub-groups visited
  // before it keep their changes).
  virtual Status ForEachSubGroup(StateAccess access, const Visitor& visit) = 0;
  // The whole state in memory, StateTensorNames order, for Engine::Snapshot (valid until the
  // next visit that writes). A store that keeps the state in files has no such view: the
  // checkpoint then streams it through ForEachSubGroup (EngineSnapshot::stream).
  virtual std::vector<std::span<const float>> Resident() const = 0;
  // Bytes of memory the store holds (master weights it owns, and moments).
  virtual size_t bytes() const = 0;
  // Swap-file I/O so far: all zero for a store in memory.
  virtual swap::IoStats io() const = 0;
};

// The state in memory. The master weights are either the store's own copy (16-bit storage) or
// borrowed: with fp32 storage they are the owned parameters themselves, updated in place.
class InMemoryOptimizerStateStore final : public OptimizerStateStore {
 public:
  // Visits everything as one sub-group.
  static constexpr size_t kWhole = 0;

  // Owns `master` (its size is the slice's); moments start at zero.
  static std::unique_ptr<InMemoryOptimizerStateStore> Owning(const OptimizerParams& optimizer,
                                                             std::vector<float> master, size_t sub_group_size = kWhole);
  // Borrows `master`, which must outlive the store; moments start at zero.
  static std::unique_ptr<InMemoryOptimizerStateStore> Borrowing(const OptimizerParams& optimizer,
                                                                std::span<float> master,
                                                                size_t sub_group_size = kWhole);

  size_t size() const override { return master_.size(); }
  int64_t step() const override { return state_.step; }
  void set_step(int64_t step) override { state_.step = step; }
  Status ForEachSubGroup(StateAccess access, const Visitor& visit) override;
  std::vector<std::span<const float>> Resident() const override;
  size_t bytes() const override { return state_.bytes() + owned_.size() * sizeof(float); }
  swap::IoStats io() const override { return {}; }

 private:
  InMemoryOptimizerStateStore(const OptimizerParams& optimizer, std::vector<float> owned, std::span<float> master,
                              size_t sub_group_size);

  std::vector<float> owned_;  // the master weights when the store owns them
  std::span<float> master_;
  OptimizerState state_;
  size_t tensor_count_;  // StateTensorNames(optimizer).size()
  size_t sub_group_size_;
};

}  // namespace dslaunch::runtime
