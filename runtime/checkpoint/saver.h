// CheckpointSaver: when and how one training run saves (the `checkpoint` section of train.json;
// docs/checkpoint.md, "When a save fails"). The training loop asks it for the periodic saves and
// for the final one; it owns the asynchronous save in flight and counts the saves that failed.
//
//   periodic save (checkpoint.interval), synchronous: a failure fails the run (as before).
//   periodic save, asynchronous: a failure is printed, recorded and counted; training goes on
//     (the previous checkpoint and `latest` are intact, and the next save may succeed).
//   final save (the end of training, or a stop with save_on_stop): first completes the save in
//     flight (as a periodic one), then saves synchronously and waits for its completion; a failure
//     fails the run with an error naming the save, its step, directory and reason, and the last
//     complete checkpoint: the steps since then would otherwise be lost silently.
//
// Every method that saves is collective: all ranks call it at the same step. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/comm/communicator.h"
#include "runtime/config/checkpoint_config.h"
#include "runtime/engine/engine.h"

namespace dslaunch::runtime {

class CheckpointSaver {
 public:
  // `print` takes progress lines: rank 0 prints every save, and a rank whose own shard or file
  // failed prints its reason. `record` takes rank 0's metrics records (JSON objects; the saver
  // calls it on rank 0 only). Either may be empty. `first_step` and `resumed_from` say where the
  // run started (0 and "" for a fresh start). `config`, `engine` and `comm` must outlive the saver.
  CheckpointSaver(const CheckpointConfig& config, const Engine& engine, Communicator& comm, CheckpointRun run,
                  SaveOptions options, std::function<void(const std::string&)> print,
                  std::function<void(const std::string&)> record, int64_t first_step, std::string resumed_from);
  ~CheckpointSaver();  // waits for a save in flight, then releases its resident state

  // Called on every rank for each complete checkpoint (periodic, asynchronous or final), with its
  // step and result; the training loop reports it (runtime/train/progress_report.h). Optional.
  void set_on_saved(std::function<void(int64_t step, const SaveResult&)> on_saved) { on_saved_ = std::move(on_saved); }

  // The rank's state of a step already copied where it stays unchanged while an asynchronous save
  // writes it (its in-memory snapshot of that step: docs/checkpoint.md, "Disk checkpoints from the
  // snapshot"): one span per state tensor; `release` is called once the save no longer reads them.
  struct ResidentState {
    std::vector<std::span<const float>> tensors;
    std::function<void()> release;
  };
  // Asked at each asynchronous save for the state of its step; nullopt: copied from the engine.
  void set_resident_state(std::function<std::optional<ResidentState>(int64_t step)> provider) {
    resident_ = std::move(provider);
  }

  // Whether checkpoint.dir is set.
  bool enabled() const { return !config_.dir.empty(); }
  // Collective: the periodic save after `step` steps (see above for failures).
  Status SavePeriodic(int64_t step);
  // Whether an asynchronous save is in flight, and whether this rank's shard of it is written.
  bool pending() const { return pending_ != nullptr; }
  bool pending_written() const;
  // Collective: completes the asynchronous save in flight, if any (every rank has written, or the
  // caller is ready to wait). A failed save is reported and counted; only a failed collective
  // (a lost peer) is returned.
  Status CompletePending();
  // Collective: ends the run's saving after `step` steps: completes the save in flight, then,
  // when `save` and the step is not saved yet, saves it synchronously. `why` names it in messages
  // ("end", "stop"). Fails, on every rank, when that save fails.
  Status SaveFinal(int64_t step, const std::string& why, bool save);

  // Complete checkpoints written by this run, in order (their directories).
  const std::vector<std::string>& saved() const { return saved_; }
  // Steps whose save failed (asynchronous periodic saves; a failed final save is an error).
  const std::vector<int64_t>& failed_steps() const { return failed_steps_; }
  // "checkpoints: 3 saved, 1 failed (step 4); last complete: DIR/global_step8"; empty when
  // checkpointing is off.
  std::string Summary() const;

 private:
  void Report(int64_t step, const std::string& why, const SaveResult& saved);
  void ReportFailure(int64_t step, const Status& status);

  const CheckpointConfig& config_;
  const Engine& engine_;
  Communicator& comm_;
  const CheckpointRun run_;
  const SaveOptions options_;
  const std::function<void(const std::string&)> print_, record_;
  std::function<void(int64_t, const SaveResult&)> on_saved_;
  int64_t last_saved_;                      // the newest step saved or being saved
  int64_t last_complete_step_;              // the step of last_complete_
  std::string last_complete_;               // the newest complete checkpoint, "" when none yet
  AsyncCheckpointBuffers async_buffers_;    // host copies, reused from save to save
  std::unique_ptr<AsyncCheckpoint> pending_;
  std::function<std::optional<ResidentState>(int64_t)> resident_;
  std::function<void()> release_pending_;  // the resident state pending_ reads, released after it
  std::vector<std::string> saved_;
  std::vector<int64_t> failed_steps_;
};

}  // namespace dslaunch::runtime
