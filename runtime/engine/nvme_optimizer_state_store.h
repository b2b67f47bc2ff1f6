// NvmeOptimizerStateStore: the optimizer state of the owned slice in a swap file under
// nvme_path (ZeRO-Infinity's optimizer offload; docs/offload.md "The optimizer state on disk").
//
// The file holds one record per sub-group of sub_group_size elements; a record is the
// sub-group's state tensors one after the other, in StateTensorNames order (master, then the
// moments), each `count` floats long where `count` is the sub-group's size. The fp32 master
// weights are on disk in every precision, as DeepSpeed's ZeRO-Offload keeps them: memory holds
// only the parameters in their storage type (and, with fp32 storage, the engine copies the updated
// master weights into them). ForEachSubGroup streams the records through a ring of buffer_count
// buffers (swap/swap_stream.h): kReadWrite reads the next record while the visitor updates this
// one and writes the previous back; kRead never writes; kWrite never reads.
//
// Memory: buffer_count x one record. The file is removed when the store is destroyed. Not
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/core/initial_values.h"
#include "runtime/engine/optimizer_state_store.h"
#include "runtime/swap/io_engine.h"
#include "runtime/swap/offload_config.h"
#include "runtime/swap/swap_file.h"
#include "runtime/swap/swap_stream.h"

namespace dslaunch::runtime {

struct NvmeStateOptions {
  swap::OffloadOptimizerConfig offload;  // device nvme, nvme_path, buffer_count (validated)
  swap::AioConfig aio;                   // validated
  size_t sub_group_size = 0;             // elements per record (> 0)
  int rank = 0;                          // names the swap file
};

class NvmeOptimizerStateStore final : public OptimizerStateStore {
 public:
  // Creates the swap file for `count` elements and writes the initial state to it, a sub-group at
  // a time: the master weights read from `master` (elements of the slice, relative to its start),
  // the moments zero. Errors from the swap layer
  // (file creation, no space, I/O) name the file.
  static Result<std::unique_ptr<NvmeOptimizerStateStore>> Create(const OptimizerParams& optimizer,
                                                                 size_t count, const InitialValues& master,
                                                                 const NvmeStateOptions& options);

  size_t size() const override { return size_; }
  int64_t step() const override { return step_; }
  void set_step(int64_t step) override { step_ = step; }
  Status ForEachSubGroup(StateAccess access, const Visitor& visit) override;
  // Empty: nothing is resident; Engine::Snapshot streams instead.
  std::vector<std::span<const float>> Resident() const override { return {}; }
  // The ring's buffers.
  size_t bytes() const override;
  // Zero for an empty slice (no file, no engine).
  swap::IoStats io() const override { return io_ != nullptr ? io_->stats() : swap::IoStats{}; }

  // One line each for what the caller should print once: O_DIRECT refused, io_uring unavailable.
  const std::vector<std::string>& warnings() const { return warnings_; }
  // The swap file; null for an empty slice (no file is made).
  const swap::SwapFile* file() const { return file_.get(); }

 private:
  NvmeOptimizerStateStore() = default;

  size_t size_ = 0;
  size_t sub_group_size_ = 0;
  size_t tensor_count_ = 0;
  int64_t step_ = 0;
  std::vector<uint64_t> group_bytes_;
  std::unique_ptr<swap::SwapFile> file_;  // heap: the stream keeps its address
  std::unique_ptr<swap::IoEngine> io_;
  std::optional<swap::SwapStream> stream_;
  std::vector<std::string> warnings_;
};

// Bytes of swap file NvmeOptimizerStateStore needs for `numel` elements (before the file's
// rounding of records to its alignment): for CheckSwapDirectory.
uint64_t NvmeStateBytes(const OptimizerParams& optimizer, size_t numel);

}  // namespace dslaunch::runtime
