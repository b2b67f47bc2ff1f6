// ParameterSwap: a rank's owned parameter partitions (ZeRO 3) in a swap file on disk instead of
// memory, for `zero_optimization.offload_param: {"device": "nvme"}` (docs/offload.md, "Parameters
// on disk"). The parameter store reads the owned parts of a run of groups before it all-gathers
// them, and the optimizer step writes the updated parts back.
//
// Each group's owned part (ShardMap::OwnPart of the group) is either resident in memory or one
// record of the swap file. The plan (PlanParameterSwap, pure) keeps resident: groups of at most
// stage3_param_persistence_threshold elements (held whole on every rank anyway), groups of which
// this rank owns nothing, and the first groups in layout order while their owned elements add up
// to at most max_in_cpu; from the first group that does not fit on, every group is on disk.
//
// I/O goes through the swap layer's IoEngine (io_uring, or pread/pwrite) with buffer_count
// aligned buffers of one record each: up to buffer_count reads or writes in flight. Not
// thread-safe. The swap file is removed when the object is destroyed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/comm/communicator.h"
#include "runtime/core/initial_values.h"
#include "runtime/core/param_layout.h"
#include "runtime/engine/engine_options.h"
#include "runtime/engine/shard_map.h"
#include "runtime/swap/aligned_buffer.h"
#include "runtime/swap/io_engine.h"
#include "runtime/swap/swap_file.h"

namespace dslaunch::runtime {

// The JSON path errors and notes of parameter offload name.
inline constexpr char kOffloadParamKey[] = "zero_optimization.offload_param";

// Where each group's owned part lives: record[g] is its record in the swap file, or -1 when it is
// resident. record_elements is the largest on-disk owned part (0 when nothing is on disk).
struct ParameterSwapPlan {
  std::vector<int> record;
  size_t record_count = 0;
  size_t record_elements = 0;
  size_t resident_elements = 0;  // owned elements kept in memory, persistent groups' included
};

// Pure: the residency policy above, for the groups of `layout`, or of these sizes (in layout
// order, contiguous from 0: the memory estimate's, before any model exists).
ParameterSwapPlan PlanParameterSwap(const ParameterLayout& layout, const ShardMap& shards,
                                    int64_t persistence_threshold, uint64_t max_in_cpu);
ParameterSwapPlan PlanParameterSwap(const std::vector<size_t>& group_sizes, const ShardMap& shards,
                                    int64_t persistence_threshold, uint64_t max_in_cpu);

template <class S>
class ParameterSwap {
 public:
  // Collective (one small all-reduce, so that no rank creates its file while another still sweeps
  // stale ones, and every rank fails when one does): removes stale swap files under nvme_path,
  // checks the directory (CheckSwapDirectory, errors naming
  // zero_optimization.offload_param.nvme_path), creates this rank's file and writes the owned
  // parts of the model's `initial` values, rounded to S (read one group's part at a time).
  // Errors: a partition larger than buffer_size, the directory checks, file creation and I/O.
  static Result<std::unique_ptr<ParameterSwap>> Create(const ParameterLayout& layout, const ShardMap& shards,
                                                       const ZeroConfig& zero, const swap::OffloadParamConfig& config,
                                                       const swap::AioConfig& aio, Communicator& comm,
                                                       const InitialValues& initial);

  // The owned part of flat elements [lo, hi) into `out` (ShardMap::OwnPart(lo, hi).size()
  // values, in order), from memory and disk.
  Status Read(size_t lo, size_t hi, std::span<S> out);
  // Owned elements [begin, begin + master.size()) (relative to the owned slice) become `master`
  // rounded to S; a record only partly covered is read, changed and written back.
  Status Write(size_t begin, std::span<const float> master);

  // Bytes of owned parts held in memory, and of the I/O buffers.
  size_t resident_bytes() const;
  size_t buffer_bytes() const;
  const ParameterSwapPlan& plan() const { return plan_; }
  // Swap-file I/O so far; zero when nothing is on disk.
  swap::IoStats io() const { return io_ != nullptr ? io_->stats() : swap::IoStats{}; }
  // Lines for the log: stale files removed, O_DIRECT refused, io_uring unavailable.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  struct Slot {
    swap::AlignedBuffer buffer;
    std::optional<swap::IoTicket> pending;
    size_t group = 0;      // of the pending transfer, for errors
    S* copy_to = nullptr;  // a pending read's destination, copied out when it completes
    size_t copy_count = 0;
  };

  ParameterSwap(const ParameterLayout& layout, const ShardMap& shards, ParameterSwapPlan plan)
      : layout_(layout), shards_(shards), plan_(std::move(plan)) {}
  // Before the first agreement: stale files swept, buffer_size and the directory checked.
  Status Prepare(const swap::OffloadParamConfig& config);
  // After it: the file, the I/O engine and buffers, and the initial values written.
  Status Fill(const swap::OffloadParamConfig& config, const swap::AioConfig& aio, int rank,
              const InitialValues& initial);
  ShardRange OwnedPart(size_t g) const;
  // The next slot, its previous transfer finished.
  Result<Slot*> NextSlot();
  Status Finish(Slot& slot);
  Status FinishAll();
  Status Start(Slot& slot, swap::IoOp op, size_t g, size_t elements);
  // "parameter swap file '<path>': group <name>" as the context of a transfer's error.
  std::string Where(size_t g) const;

  const ParameterLayout& layout_;
  const ShardMap shards_;  // a copy: the engine's is made after the swap
  const ParameterSwapPlan plan_;
  std::vector<std::vector<S>> resident_;  // per group: its owned part when resident
  std::optional<swap::SwapFile> file_;    // absent when nothing is on disk
  std::unique_ptr<swap::IoEngine> io_;
  std::vector<Slot> slots_;
  size_t next_slot_ = 0;
  std::vector<std::string> notes_;
};

}  // namespace dslaunch::runtime
