#include "runtime/engine/nvme_optimizer_state_store.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/check.h"

namespace dslaunch::runtime {
namespace {

// The tensors of a record of `count` elements, laid out one after the other in `bytes`.
StateSubGroup SubGroupIn(std::span<std::byte> bytes, size_t begin, size_t count, size_t tensor_count) {
  DSLAUNCH_CHECK(bytes.size() == count * tensor_count * sizeof(float));
  float* data = reinterpret_cast<float*>(bytes.data());
  StateSubGroup sub;
  sub.begin = begin;
  for (size_t i = 0; i < tensor_count; ++i) sub.tensors.emplace_back(data + i * count, count);
  return sub;
}

swap::RingMode ModeOf(StateAccess access) {
  switch (access) {
    case StateAccess::kRead: return {.read = true, .write = false};
    case StateAccess::kWrite: return {.read = false, .write = true};
    case StateAccess::kReadWrite: return {.read = true, .write = true};
  }
  return {};
}

}  // namespace

uint64_t NvmeStateBytes(const OptimizerParams& optimizer, size_t numel) {
  return uint64_t{numel} * StateTensorNames(optimizer).size() * sizeof(float);
}

Result<std::unique_ptr<NvmeOptimizerStateStore>> NvmeOptimizerStateStore::Create(const OptimizerParams& optimizer,
                                                                                   size_t count,
                                                                                   const InitialValues& master,
                                                                                   const NvmeStateOptions& options) {
  DSLAUNCH_CHECK(options.sub_group_size > 0);
  std::unique_ptr<NvmeOptimizerStateStore> store(new NvmeOptimizerStateStore());
  store->size_ = count;
  store->sub_group_size_ = options.sub_group_size;
  store->tensor_count_ = StateTensorNames(optimizer).size();
  if (count == 0) return store;  // nothing to keep: ForEachSubGroup visits one empty sub-group

  for (size_t begin = 0; begin < count; begin += options.sub_group_size) {
    const size_t n = std::min(options.sub_group_size, count - begin);
    store->group_bytes_.push_back(uint64_t{n} * store->tensor_count_ * sizeof(float));
  }
  swap::SwapFileOptions file_options;
  file_options.nvme_path = options.offload.nvme_path;
  file_options.kind = swap::SwapKind::kOptimizer;
  file_options.rank = options.rank;
  file_options.record_bytes = store->group_bytes_.front();  // the first sub-group is the largest
  file_options.record_count = store->group_bytes_.size();
  DSLAUNCH_ASSIGN_OR_RETURN(swap::SwapFile file, swap::SwapFile::Create(file_options));
  store->file_ = std::make_unique<swap::SwapFile>(std::move(file));
  if (store->file_->warning()) store->warnings_.push_back(*store->file_->warning());
  swap::IoEngineChoice io = swap::MakeIoEngine(swap::IoBackend::kUring, options.aio);
  if (io.warning) store->warnings_.push_back(*io.warning);
  store->io_ = std::move(io.engine);
  DSLAUNCH_ASSIGN_OR_RETURN(swap::SwapStream stream,
                            swap::SwapStream::Create(store->file_.get(), store->io_.get(), options.offload.buffer_count));
  store->stream_.emplace(std::move(stream));

  // The first fill: the master weights given, the moments zero.
  DSLAUNCH_RETURN_IF_ERROR(store->ForEachSubGroup(StateAccess::kWrite, [&](const StateSubGroup& sub) {
    master(sub.begin, sub.master());
    for (size_t i = 1; i < sub.tensors.size(); ++i) std::fill(sub.tensors[i].begin(), sub.tensors[i].end(), 0.0f);
    return Status::Ok();
  }));
  return store;
}

Status NvmeOptimizerStateStore::ForEachSubGroup(StateAccess access, const Visitor& visit) {
  if (size_ == 0) {
    StateSubGroup empty;
    empty.tensors.assign(tensor_count_, std::span<float>());
    return visit(empty);
  }
  return stream_->Run(ModeOf(access), group_bytes_, [&](size_t group, std::span<std::byte> bytes) {
    const size_t begin = group * sub_group_size_;
    const size_t count = std::min(sub_group_size_, size_ - begin);
    return visit(SubGroupIn(bytes, begin, count, tensor_count_));
  });
}

size_t NvmeOptimizerStateStore::bytes() const {
  if (!stream_) return 0;
  return stream_->buffer_count() * file_->record_stride();
}

}  // namespace dslaunch::runtime
