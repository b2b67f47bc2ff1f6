// CheckpointSchedule: when the training loop saves (the `checkpoint` section of train.json;
// docs/checkpoint.md, "When a save fails"), as decisions the loop asks for and carries out through
// CheckpointSaver (runtime/checkpoint/saver.h). Pure: no files, no communicator; every rank asks
// with the same inputs and gets the same answer, so the collective saves stay in step.
//
//   after a step that is a multiple of checkpoint.interval, not the last, no stop: a periodic save
//     (asynchronous with checkpoint.async);
//   after a step at which some rank was told to stop: the final save "stop", which saves when
//     checkpoint.save_on_stop is set or the step is due anyway, and ends the run;
//   after the last step: the final save "end", which always saves.
// A final save first completes the asynchronous save in flight; with checkpointing off (no
// checkpoint.dir) no decision saves.
#pragma once

#include <cstdint>
#include <string_view>

#include "runtime/config/checkpoint_config.h"

namespace dslaunch::runtime {

enum class SaveKind {
  kNone,      // nothing to save after this step
  kPeriodic,  // CheckpointSaver::SavePeriodic
  kFinal,     // CheckpointSaver::SaveFinal: the run ends after it
};

struct SaveDecision {
  SaveKind kind = SaveKind::kNone;
  bool async = false;     // kPeriodic: the save runs beside the next steps (checkpoint.async)
  bool save = false;      // kFinal: whether to save, not only complete the save in flight
  std::string_view why;   // kFinal: "stop" or "end" (the saver names the save with it)

  friend bool operator==(const SaveDecision&, const SaveDecision&) = default;
};

class CheckpointSchedule {
 public:
  // `total_steps` is train.steps: the step after which the run ends.
  CheckpointSchedule(const CheckpointConfig& config, int64_t total_steps);

  // Whether checkpoint.dir is set.
  bool enabled() const { return enabled_; }
  // Whether `step` (steps done) is a multiple of checkpoint.interval (> 0), checkpointing on.
  bool IntervalDue(int64_t step) const;

  // After step `step` (1-based: the steps done); `stop` is whether any rank was told to stop.
  // kFinal "stop" when stopping; else kPeriodic when due and `step` is not the last; else kNone
  // (the last step's save is AtEnd's).
  SaveDecision AfterStep(int64_t step, bool stop) const;
  // After the last step: kFinal "end", saving (when checkpointing is on).
  SaveDecision AtEnd() const;

  // Whether the loop completes the asynchronous save in flight now, without waiting: only once
  // every rank has written its shard (`ranks_written` of `world`), so that no rank blocks.
  static bool CompletePendingNow(bool pending, int ranks_written, int world);

 private:
  bool enabled_;
  int64_t interval_;
  bool async_;
  bool save_on_stop_;
  int64_t total_steps_;
};

// The steps between in-memory snapshots (docs/checkpoint.md, "Snapshots in memory"): the
// configured checkpoint.snapshot_interval, or for kSnapshotIntervalAuto every step when the job can
// restart (`max_restarts` > 0, TORCHELASTIC_MAX_RESTARTS) and an agent holds the memory
// (`agent_memory`), else 0: none where nothing would ever read them, and none where the optimizer
// state is offloaded to NVMe (`state_offloaded`: it is there because it does not fit in memory, and
// a copy every step would read it all back). Without agent memory it is 0 in every case.
int64_t ResolveSnapshotInterval(int64_t configured, bool agent_memory, int max_restarts, bool state_offloaded);

}  // namespace dslaunch::runtime
