// In-memory snapshots (docs/checkpoint.md, "Snapshots in memory"): a rank's resumable state,
// the same content as its checkpoint shard and meta.json, kept in memory its node's agent holds
// (agent/workers/snapshot_memory.h), so that it survives the worker.
//
// A slot is one memory file: a 64-byte header, meta.json's text, then the rank's slice
// ShardFor(numel, world, rank) of every state tensor, fp32:
//
//   header   "DSLSNAP1", complete flag, tensor count, step, rank, world, meta bytes, floats per
//            tensor, CRC-32C of everything after the header
//   meta     CheckpointMeta as JSON (partitions without files' sizes or checksums)
//   tensors  tensor 0's slice, tensor 1's, ... (StateTensorNames order)
//
// A write first clears the complete flag, then copies and checksums, then sets it: a worker killed
// mid-write leaves a slot that reads as incomplete, never as a snapshot. Each rank has two slots;
// MemorySnapshots writes into the one that does not hold the newest snapshot every rank has
// completed, so that one is always whole somewhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"
#include "runtime/engine/engine.h"

namespace dslaunch::runtime {

// What a complete slot holds: the snapshot of rank `rank` of a run of `world` ranks after `step`
// training steps.
struct SnapshotInfo {
  int64_t step = 0;
  int rank = 0;
  int world = 0;
  friend bool operator==(const SnapshotInfo&, const SnapshotInfo&) = default;
};

class SnapshotSlot {
 public:
  // Takes `fd` (a memory file, or any file that can be resized and mapped); `name` names the slot
  // in messages.
  SnapshotSlot(UniqueFd fd, std::string name);
  ~SnapshotSlot();
  SnapshotSlot(SnapshotSlot&& other) noexcept;
  SnapshotSlot& operator=(SnapshotSlot&&) = delete;
  SnapshotSlot(const SnapshotSlot&) = delete;
  SnapshotSlot& operator=(const SnapshotSlot&) = delete;

  const std::string& name() const { return name_; }

  // Called in the middle of every write, after the first tensor is copied and before the complete
  // flag is set: the crash tests' hook (the worker's DSLAUNCH_SNAPSHOT_FAULT kills the process
  // there). Empty: none.
  using WriteHook = std::function<void(const SnapshotInfo& info)>;

  // Writes `snap` (the rank's slice of every state tensor, resident or streamed) with `meta_json`
  // as the snapshot `info`. Errors name the slot (a failed resize: the node is out of memory).
  Status Write(const SnapshotInfo& info, std::string_view meta_json, const EngineSnapshot& snap,
               const WriteHook& mid_write = {});
  // Marks the slot empty (its bytes stay until the next write).
  void Clear();
  // Reads and checks the slot: kNotFound when it is empty or a write did not complete; kDataLoss
  // when its sizes or its CRC-32C disagree with the header (each names the slot).
  Result<SnapshotInfo> Check();
  // After a successful Check: meta.json's text, and state tensor `index`'s slice.
  std::string_view meta() const;
  std::span<const float> tensor(size_t index) const;
  // Bytes the slot holds (its memory file's size).
  size_t bytes() const { return mapped_; }

 private:
  Status Map(size_t size);
  void Unmap();

  UniqueFd fd_;
  std::string name_;
  std::byte* map_ = nullptr;
  size_t mapped_ = 0;
};

// A rank's two slots and which one the next snapshot goes to. Not thread-safe.
class MemorySnapshots {
 public:
  // From DSLAUNCH_SNAPSHOT_FDS's value ("7,8", as the agent sets it): kInvalidArgument naming the
  // variable when it is not two descriptors of open files.
  static Result<MemorySnapshots> FromEnv(std::string_view value);
  explicit MemorySnapshots(std::vector<SnapshotSlot> slots) : slots_(std::move(slots)), holds_(slots_.size()) {}

  std::vector<SnapshotSlot>& slots() { return slots_; }
  // Bytes the slots hold now.
  size_t bytes() const;

  // The slot the snapshot of a step goes to: never the one holding the newest committed step.
  // Writes it and remembers which step each slot holds.
  Status Write(const SnapshotInfo& info, std::string_view meta_json, const EngineSnapshot& snap);
  // The hook every write calls midway (SnapshotSlot::WriteHook).
  void set_mid_write(SnapshotSlot::WriteHook hook) { mid_write_ = std::move(hook); }
  // Every rank has written the snapshot of `step`: it is the one to keep from now on.
  void Committed(int64_t step) { committed_ = step; }
  // At the start of a run: keeps only the slot holding `step` (the snapshot the run resumed from),
  // or none, so that no snapshot of an abandoned run is taken for one of this run later.
  void KeepOnly(std::optional<int64_t> step);

 private:
  std::vector<SnapshotSlot> slots_;
  std::vector<std::optional<int64_t>> holds_;  // the step each slot holds, when known
  std::optional<int64_t> committed_;
  SnapshotSlot::WriteHook mid_write_;
};

}  // namespace dslaunch::runtime
