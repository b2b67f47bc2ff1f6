#include "runtime/engine/optimizer_state_store.h"

#include <algorithm>
#include <utility>

namespace dslaunch::runtime {

std::vector<std::string> StateTensorNames(const OptimizerParams& optimizer) {
  if (optimizer.kind == OptimizerKind::kSgd) {
    if (optimizer.momentum != 0.0) return {"master", "momentum_buffer"};
    return {"master"};
  }
  return {"master", "exp_avg", "exp_avg_sq"};
}

std::unique_ptr<InMemoryOptimizerStateStore> InMemoryOptimizerStateStore::Owning(const OptimizerParams& optimizer,
                                                                                 std::vector<float> master,
                                                                                 size_t sub_group_size) {
  std::span<float> view(master);  // the vector's buffer moves into the store with it
  return std::unique_ptr<InMemoryOptimizerStateStore>(
      new InMemoryOptimizerStateStore(optimizer, std::move(master), view, sub_group_size));
}

std::unique_ptr<InMemoryOptimizerStateStore> InMemoryOptimizerStateStore::Borrowing(const OptimizerParams& optimizer,
                                                                                    std::span<float> master,
                                                                                    size_t sub_group_size) {
  return std::unique_ptr<InMemoryOptimizerStateStore>(
      new InMemoryOptimizerStateStore(optimizer, {}, master, sub_group_size));
}

InMemoryOptimizerStateStore::InMemoryOptimizerStateStore(const OptimizerParams& optimizer, std::vector<float> owned,
                                                         std::span<float> master, size_t sub_group_size)
    : owned_(std::move(owned)),
      master_(master),
      state_(OptimizerState::For(optimizer, master.size())),
      tensor_count_(StateTensorNames(optimizer).size()),
      sub_group_size_(sub_group_size == kWhole ? std::max<size_t>(1, master.size()) : sub_group_size) {}

// In memory every access is the same: the visitor works on the buffers themselves.
Status InMemoryOptimizerStateStore::ForEachSubGroup(StateAccess, const Visitor& visit) {
  const size_t n = master_.size();
  size_t begin = 0;
  do {
    const size_t count = std::min(sub_group_size_, n - begin);
    StateSubGroup sub;
    sub.begin = begin;
    sub.tensors.push_back(master_.subspan(begin, count));
    if (tensor_count_ > 1) sub.tensors.push_back(std::span<float>(state_.m).subspan(begin, count));
    if (tensor_count_ > 2) sub.tensors.push_back(std::span<float>(state_.v).subspan(begin, count));
    DSLAUNCH_RETURN_IF_ERROR(visit(sub));
    begin += count;
  } while (begin < n);
  return Status::Ok();
}

std::vector<std::span<const float>> InMemoryOptimizerStateStore::Resident() const {
  std::vector<std::span<const float>> out = {master_};
  if (tensor_count_ > 1) out.emplace_back(state_.m);
  if (tensor_count_ > 2) out.emplace_back(state_.v);
  return out;
}

}  // namespace dslaunch::runtime
