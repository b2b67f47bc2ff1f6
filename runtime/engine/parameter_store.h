// ParameterStore: the model's parameters in their storage type S (fp32, fp16 or bf16), and the
// answer to "are parameters partitioned?" (ZeRO 3, docs/engine.md "The engine's three parts").
//
//   not partitioned (ZeRO 0-2): every rank holds all parameters. Acquire hands out the group
//     itself (fp32 storage) or an fp32 copy of it (16-bit storage).
//   partitioned (ZeRO 3): a rank holds its ShardMap slice, plus whole copies of the groups of at
//     most stage3_param_persistence_threshold elements. Acquire of a group that is not held
//     all-gathers it, with the next groups in the direction of travel in the same collective (up
//     to stage3_prefetch_bucket_size elements, under stage3_max_live_parameters live); Release
//     frees it when its last user releases it.
//
// After the optimizer step the owner writes its updated master weights (WriteOwned, sub-group by
// sub-group) and Publish makes them visible where the stage needs them: all-gathered into the
// whole buffer when only the optimizer state is partitioned (ZeRO 1-2), into the persistent
// groups at ZeRO 3, nothing at ZeRO 0.
//
// With a ParameterSwap (ZeRO 3 with offload_param on nvme, parameter_swap.h) the owned slice is
// not held here: the gather of a run of groups first reads its owned parts from the swap (memory
// or disk), WriteOwned writes to the swap, and a failed write is returned by the next Publish.
//
// Collectives inside Acquire record their failure in the shared DeferredStatus; Publish returns
// its own. The communicator, layout, shard map, scratch buffers and deferred status must outlive
// the store. Not thread-safe.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/comm/communicator.h"
#include "runtime/core/initial_values.h"
#include "runtime/core/param_layout.h"
#include "runtime/engine/deferred_status.h"
#include "runtime/engine/engine_options.h"
#include "runtime/engine/parameter_swap.h"
#include "runtime/engine/scratch_buffers.h"
#include "runtime/engine/shard_map.h"

namespace dslaunch::runtime {

template <class S>
class ParameterStore {
 public:
  // `initial` (the model's values, read a range at a time) becomes the parameters, rounded to S.
  // `swap` (partitioned only; nullptr: in memory) holds the owned slice instead, filled from
  // `initial` already.
  ParameterStore(const ParameterLayout& layout, Communicator& comm, const ZeroConfig& zero, bool partitioned,
                 const ShardMap& shards, ScratchBuffers& scratch, DeferredStatus& deferred,
                 const InitialValues& initial, std::unique_ptr<ParameterSwap<S>> swap = nullptr);

  // ParameterAccess::Acquire/Release (runtime/core/parameter_access.h).
  std::span<const float> Acquire(int g);
  void Release(int g);
  // Frees the fp32 copies nobody holds (fetched ahead and never acquired): they go stale when the
  // step changes the parameters. DSLAUNCH_CHECKs that every Acquire was Released.
  void DropPrefetched();

  // The parameters of the owned slice (ShardMap::own()) in their storage type. With fp32 storage
  // they are the master weights themselves (InMemoryOptimizerStateStore over them). Only without
  // a swap (offloaded(): DSLAUNCH_CHECKed).
  std::span<S> Owned();
  bool offloaded() const { return swap_ != nullptr; }
  // Writes updated master weights for owned elements [begin, begin + master.size()) (relative to
  // the owned slice), rounded to S; nothing to do when `master` is that part of Owned() itself.
  void WriteOwned(size_t begin, std::span<const float> master);
  // Collective: the owners' written values to every rank that holds them (above).
  Status Publish();

  // Bytes of parameters held: the whole buffer or the slice, plus persistent groups.
  size_t bytes() const;
  // Bytes of the kept staging buffers of all-gathers (ZeRO 3) and of the swap's I/O buffers.
  size_t staging_bytes() const;
  // The swap's log lines (parameter_swap.h); empty without one.
  std::vector<std::string> notes() const;
  // The swap's I/O so far; zero without one.
  swap::IoStats io() const;

 private:
  struct Group {
    std::vector<S> persistent;  // ZeRO 3: the whole group, kept on every rank
    std::vector<float> live;    // fp32 copy handed out by Acquire
    int refs = 0;               // Acquires not yet Released
    bool fetched = false;       // `live` holds the current values
  };

  const ParameterGroup& Info(int g) const { return layout_.groups()[static_cast<size_t>(g)]; }
  Group& At(int g) { return groups_[static_cast<size_t>(g)]; }
  void FreeLive(Group& st);
  void Fetch(int g);
  // ZeRO 3: the run of groups [first, last] one all-gather fetches for g.
  std::pair<int, int> PlanGather(int g) const;
  void Gather(int first, int last);
  Status PublishWhole();
  Status PublishPersistent();
  // The owned part of flat [lo, hi) as an all-gather's input: a view of params_, or read from
  // the swap into owned_staging_ (a failure recorded in deferred_ or returned).
  Result<ConstBufferView> OwnedInput(size_t lo, size_t hi);

  const ParameterLayout& layout_;
  Communicator& comm_;
  const ZeroConfig zero_;
  const bool partitioned_;
  const ShardMap& shards_;
  ScratchBuffers& scratch_;
  DeferredStatus& deferred_;
  std::vector<S> params_;  // whole, or the owned slice when partitioned
  std::vector<Group> groups_;
  std::vector<S> staging_;  // ZeRO 3, 16-bit: gathered groups before conversion
  std::unique_ptr<ParameterSwap<S>> swap_;  // ZeRO 3 offload: the owned slice; params_ is empty
  std::vector<S> owned_staging_;            // with swap_: owned parts read for an all-gather
  Status write_status_;                     // with swap_: the first failed WriteOwned
  size_t live_elements_ = 0;
  int last_acquired_ = -1;
};

}  // namespace dslaunch::runtime
