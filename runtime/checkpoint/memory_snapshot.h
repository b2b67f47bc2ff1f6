// In-memory snapshots (docs/checkpoint.md, "Snapshots in memory"): a rank's resumable state,
// the same content as its checkpoint shard and meta.json, kept in memory its node's agent holds
// (agent/workers/snapshot_memory.h), so that it survives the worker.
//
// A slot is one memory file: a 128-byte header (common/snapshot/slot_header.h), meta.json's text,
// then the rank's slice ShardFor(numel, world, rank) of every state tensor, fp32:
//
//   header   "DSLSNAP2", complete flag, tensor count, step, rank, world, meta bytes, floats per
//            tensor, CRC-32C of everything after the header, generation, replicas wanted, and
//            the agent's answer about its copies to peer nodes (acked)
//   meta     CheckpointMeta as JSON (partitions without files' sizes or checksums)
//   tensors  tensor 0's slice, tensor 1's, ... (StateTensorNames order)
//
// A write first clears the complete flag, then copies and checksums, then sets it: a worker killed
// mid-write leaves a slot that reads as incomplete, never as a snapshot. Each rank has two slots;
// MemorySnapshots writes into the one that does not hold the newest snapshot every rank has
// completed, so that one is always whole somewhere. With copies on peer nodes (replicas > 0), the
// agent sends each completed slot to them and answers in its header; the trainer takes the next
// snapshot only once every rank's latest has its answer, so the peers always hold a step every
// rank also kept. A rank on such a peer node reads the copies it was given, read-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/snapshot/slot_header.h"
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

// Who wrote a slot's content, for its header: the run's restart count, and how many peer nodes
// its agent is to copy it to.
struct SlotOrigin {
  int generation = 0;
  int replicas = 0;
};

class SnapshotSlot {
 public:
  // kWritable: this rank's own slot; kReadOnly: a peer's copy its agent holds (sealed).
  enum class Access { kWritable, kReadOnly };
  // Takes `fd` (a memory file, or any file that can be resized and mapped); `name` names the slot
  // in messages.
  SnapshotSlot(UniqueFd fd, std::string name, Access access = Access::kWritable);
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
               const WriteHook& mid_write = {}, const SlotOrigin& origin = {});
  // The agent's answer about the copies of the snapshot this process last wrote here.
  snapshot::Ack ack() const;
  // Marks the slot empty (its bytes stay until the next write; a read-only slot stays as it is).
  void Clear();
  // Reads and checks the slot: kNotFound when it is empty or a write did not complete; kDataLoss
  // when its sizes or its CRC-32C disagree with the header (each names the slot).
  Result<SnapshotInfo> Check();
  // After a successful Check: meta.json's text, and state tensor `index`'s slice.
  std::string_view meta() const;
  std::span<const float> tensor(size_t index) const;
  size_t tensors() const;
  // Bytes the slot holds (its memory file's size).
  size_t bytes() const { return mapped_; }

 private:
  Status Map(size_t size);
  void Unmap();

  UniqueFd fd_;
  std::string name_;
  Access access_ = Access::kWritable;
  std::byte* map_ = nullptr;
  size_t mapped_ = 0;
};

// A rank's two slots and which one the next snapshot goes to, and the peers' copies its agent gave
// it to read at a restart. Not thread-safe.
class MemorySnapshots {
 public:
  // From DSLAUNCH_SNAPSHOT_FDS's value ("7,8", as the agent sets it) and
  // DSLAUNCH_SNAPSHOT_REPLICA_FDS's ("9,10,11", or empty: none): kInvalidArgument naming the
  // variable when they are not descriptors of open files (two of the first).
  static Result<MemorySnapshots> FromEnv(std::string_view value, std::string_view replica_value = {});
  explicit MemorySnapshots(std::vector<SnapshotSlot> slots, std::vector<SnapshotSlot> replicas = {})
      : slots_(std::move(slots)), holds_(slots_.size()), replicas_(std::move(replicas)) {}

  std::vector<SnapshotSlot>& slots() { return slots_; }
  // Every slot a restore may read: this rank's own, then the peers' copies.
  std::vector<SnapshotSlot*> Readable();
  // Bytes the slots hold now (own and copies).
  size_t bytes() const;

  // What every write stamps in the header (SlotOrigin).
  void set_origin(SlotOrigin origin) { origin_ = origin; }
  const SlotOrigin& origin() const { return origin_; }
  // The slot the snapshot of a step goes to: never the one holding the newest committed step.
  // Writes it and remembers which step each slot holds.
  Status Write(const SnapshotInfo& info, std::string_view meta_json, const EngineSnapshot& snap);
  // The hook every write calls midway (SnapshotSlot::WriteHook).
  void set_mid_write(SnapshotSlot::WriteHook hook) { mid_write_ = std::move(hook); }
  // Every rank has written the snapshot of `step`: it is the one to keep from now on.
  void Committed(int64_t step) { committed_ = step; }
  // Whether the agent has answered for this rank's latest snapshot (always, without copies to
  // peers or before the first): stored on every peer, or failed. A failure is answered once:
  // `*failed` gets its step.
  bool Answered(std::optional<int64_t>* failed);
  // At the start of a run: keeps only the slot holding `step` (the snapshot the run resumed from),
  // or none, so that no snapshot of an abandoned run is taken for one of this run later.
  void KeepOnly(std::optional<int64_t> step);
  // After the restore: the peers' copies are not read again (their memory stays with the agent).
  void DropReplicas() { replicas_.clear(); }
  // The slot holding this run's snapshot of `step`, which no write touches until Unpin (an
  // asynchronous save writes it to disk meanwhile); nullptr when no slot holds it. One at a time.
  // While one is pinned the next snapshots go to the other slot, even over the newest committed
  // one: the pinned slot keeps an older whole snapshot meanwhile.
  const SnapshotSlot* Pin(int64_t step);
  void Unpin() { pinned_.reset(); }

 private:
  std::vector<SnapshotSlot> slots_;
  std::vector<std::optional<int64_t>> holds_;  // the step each slot holds, when known
  std::vector<SnapshotSlot> replicas_;
  std::optional<int64_t> committed_;
  std::optional<size_t> latest_;  // the slot of this run's latest write, until answered
  std::optional<size_t> pinned_;  // Pin
  SlotOrigin origin_;
  SnapshotSlot::WriteHook mid_write_;
};

}  // namespace dslaunch::runtime
