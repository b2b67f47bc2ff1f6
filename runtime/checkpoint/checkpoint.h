// Checkpoints (docs/checkpoint.md): sharded, atomic, resumable at another world size or ZeRO stage.
//
//   DIR/global_step<N>/rank<r>.safetensors   rank r's slice ShardFor(numel, world, r) of the fp32
//                                            state tensors ("master", "exp_avg", ...); of a model
//                                            split over ranks, its pieces of the whole model's
//   DIR/global_step<N>/meta.json             CheckpointMeta: written last, by rank 0
//   DIR/latest                               "global_step<N>": replaced atomically, after meta.json
// (every name made and parsed in runtime/checkpoint/names.h)
//
// A checkpoint is complete once every rank's shard is written and fsynced and rank 0 has written
// meta.json (temporary file, fsync, rename, directory fsync) and then replaced `latest` the same
// way. A crash at any moment leaves `latest` naming the previous complete checkpoint. Loading
// verifies each shard it reads against the CRC-32C in meta.json and re-partitions on the fly, so a
// checkpoint of N ranks at any stage, in any grid of pipeline stages and tensor ranks, resumes on
// M ranks at any stage, in any grid, without a conversion step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "runtime/checkpoint/file_system.h"
#include "runtime/checkpoint/meta.h"
#include "runtime/comm/communicator.h"
#include "runtime/config/train_config.h"
#include "runtime/core/param_layout.h"
#include "runtime/engine/engine.h"

namespace dslaunch::runtime {

// What a checkpoint records about the run besides the engine's state.
struct CheckpointRun {
  std::string model;           // "gpt", "mlp"
  const ParameterLayout* layout = nullptr;  // the whole model's
  // A model split over ranks (pipeline stages, tensor ranks): where this rank's part lies in the
  // whole model (its `whole` is `layout`), and the grid. Null: the engine holds all of `layout`,
  // and the grid is data parallel.
  const PartPlacement* part = nullptr;
  CheckpointGrid grid;
  int64_t global_batch = 0;
  uint64_t seed = 0;
  int zero_stage = 0;
  std::string precision;
  std::string optimizer;
  std::string config_sha256;
};

struct SaveOptions {
  // > 0: afterwards delete checkpoints older than the newest keep_last complete ones
  // (runtime/checkpoint/checkpoint_directory.h, ApplyRetention)
  int keep_last = 0;
  // Where the save's files go: null is LocalFileSystem(); the crash tests pass a
  // FaultInjectingFileSystem (runtime/checkpoint/fault_injecting_file_system.h). Must outlive
  // the save (for an asynchronous one, until Finish).
  FileSystem* file_system = nullptr;
  // Rank 0 calls it just before it writes meta.json (and so `latest`); an error means this rank's
  // generation is no longer the job's current one (docs/elastic.md, "Fencing a lost node"), and
  // the save fails (kAborted) with the previous checkpoint and `latest` untouched. Empty: none.
  std::function<Status()> fence;
};

struct SaveResult {
  std::string path;            // DIR/global_step<N>
  uint64_t bytes = 0;          // all shards together
  double seconds = 0.0;        // this rank's wall time from the start of the save to its completion
  double stall_seconds = 0.0;  // of which training waited (all of it for a synchronous save)
  bool from_snapshot = false;  // an asynchronous save written from this rank's in-memory snapshot
};

// Collective: saves the engine's state after `step` training steps into DIR/global_step<step>.
// Fails (on every rank) when a rank cannot write its shard, naming the rank and the file; the
// previous checkpoint and `latest` are then untouched, and rank 0 removes the partial step
// directory (saying so in its error when it cannot). A complete save removes the step directories
// without meta.json that earlier crashes left, and applies keep_last.
Result<SaveResult> SaveCheckpoint(const std::string& dir, int64_t step, const Engine& engine, Communicator& comm,
                                  const CheckpointRun& run, const SaveOptions& options);

// An asynchronous save (checkpoint.async): Start copies this rank's state to host memory and
// writes its shard on a background thread while training goes on; Finish completes the checkpoint
// (meta.json, `latest`) once every rank's shard is written. One save in flight at a time: the
// owner finishes one before starting the next. A failed save leaves the previous checkpoint and
// `latest` as they were.
// The host memory an asynchronous save copies the state into: kept by the caller from one save
// to the next (like DeepSpeed's pinned buffers), so that only the first save pays for fresh pages.
struct AsyncCheckpointBuffers {
  std::vector<std::vector<float>> tensors;
  size_t bytes() const {
    size_t n = 0;
    for (const auto& t : tensors) n += t.capacity() * sizeof(float);
    return n;
  }
};

class AsyncCheckpoint {
 public:
  // Collective (prepares the directory): the same step on every rank. `buffers` must outlive the
  // save (until Finish or destruction) and not be shared by two saves. The rank's state is copied
  // into them while training waits, unless `resident` gives it already copied (one span per state
  // tensor, the rank's slice, in StateTensorNames order: its in-memory snapshot of `step`), which
  // the writer then reads as it is: it must not change until Finish or destruction.
  static Result<std::unique_ptr<AsyncCheckpoint>> Start(const std::string& dir, int64_t step, const Engine& engine,
                                                        Communicator& comm, const CheckpointRun& run,
                                                        const SaveOptions& options, AsyncCheckpointBuffers& buffers,
                                                        const std::vector<std::span<const float>>* resident = nullptr);
  ~AsyncCheckpoint();  // waits for the writer thread
  AsyncCheckpoint(const AsyncCheckpoint&) = delete;
  AsyncCheckpoint& operator=(const AsyncCheckpoint&) = delete;

  int64_t step() const;
  // This rank's shard is written (or failed): Finish will not wait for the disk.
  bool written() const;
  // Time Start took (training also waits in Finish: SaveResult::stall_seconds has both).
  double stall_seconds() const;
  // Collective: waits for this rank's shard, then completes the checkpoint as SaveCheckpoint does.
  Result<SaveResult> Finish(Communicator& comm);

 private:
  struct State;
  explicit AsyncCheckpoint(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Collective, for a model split over ranks (run.part set): every rank's pieces of the whole model
// as its shard of a save records them, in rank order, where the engine holds `range` of its part
// (EngineSnapshot::range). What MetaOfSnapshot needs; the same at every step, so gathered once.
Result<std::vector<std::vector<WholePiece>>> GatherShardPieces(Communicator& comm, const CheckpointRun& run,
                                                               ShardRange range);

// meta.json's record of a save of `snap` after `step` steps on `world` ranks, without the shards'
// sizes and checksums: what an in-memory snapshot carries (runtime/checkpoint/memory_snapshot.h).
// A model split over ranks needs `pieces`, GatherShardPieces' answer (version 2); else empty.
CheckpointMeta MetaOfSnapshot(int64_t step, int world, const EngineSnapshot& snap, const CheckpointRun& run,
                              const std::vector<std::vector<WholePiece>>& pieces = {});

// Whether the checkpoint `meta` fits this run: the model, its parameters, the optimizer's state
// tensors, the global batch and the seed. The error, prefixed with `what` ("checkpoint P"), says
// what differs and what to do.
Status CheckCheckpointFits(const CheckpointMeta& meta, const std::string& what, const Engine& engine,
                           const CheckpointRun& run);

// meta.json of the checkpoint directory `path` (a global_stepN), read and checked.
Result<CheckpointMeta> ReadCheckpointMeta(const std::string& path);

struct LoadResult {
  CheckpointMeta meta;
  std::string warning;  // e.g. the config changed since the save; empty when none
  uint64_t bytes = 0;    // the checkpoint's size (all shards)
  double seconds = 0.0;  // this rank's wall time for the load
};

// Collective: restores `engine` from the checkpoint at `path`, whatever world size and ZeRO stage
// saved it. Checks that it fits the run (model, parameter names, shapes and offsets, optimizer
// state, global batch: the error says what differs and what to do) and that every shard this rank
// reads matches its CRC-32C (the error names the file). The ranks agree on failure: every rank
// returns the error of the lowest rank that failed, with its code and reason
// ("rank 1 could not read checkpoint P: P/rank00001.safetensors is corrupt: ..."). After a
// failure the engine must be restored again (a partial restore leaves a mix) or not used.
Result<LoadResult> LoadCheckpoint(const std::string& path, Engine& engine, Communicator& comm,
                                  const CheckpointRun& run);

}  // namespace dslaunch::runtime
