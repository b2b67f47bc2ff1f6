// CheckpointConfig: train.json's "checkpoint" section (docs/train-json.md), and CheckpointLoad,
// which checkpoint a run loads. Filled by ParseTrainConfig (runtime/config/train_config.h, which
// holds one); read by the checkpoint code (which checkpoint to resume: runtime/checkpoint/resume.h,
// the saver) and the training loop's schedule of saves, which need nothing else of train.json.
// Loading and resuming are specified in docs/checkpoint.md, "Loading".
#pragma once

#include <cstdint>
#include <string>

namespace dslaunch::runtime {

// Which checkpoint a run loads at the start ("checkpoint.load"): none (kNone, the key absent),
// the newest complete checkpoint in `dir` (kLatest: "auto" or "latest"), or the one at
// `load_path` (kPath: any other value).
enum class CheckpointLoad { kNone, kLatest, kPath };

// Paths resolve against the train.json's directory, like DataConfig's (absolute paths are kept).
struct CheckpointConfig {
  std::string dir;           // empty: checkpointing off
  int64_t interval = 0;      // steps between saves; 0 = no periodic saves
  int keep_last = 0;         // checkpoints to keep; 0 = keep all
  CheckpointLoad load = CheckpointLoad::kNone;
  std::string load_path;     // kPath only
  bool async = false;
  bool save_on_stop = true;  // save when the job is told to stop
  // A restart (generation > 0) with `dir`: resume from the newest complete checkpoint in dir when
  // there is one, whatever `load` says (docs/checkpoint.md, "Loading").
  bool resume_newest = false;
  // Steps between in-memory snapshots (docs/checkpoint.md, "Snapshots in memory"); 0: none;
  // kSnapshotIntervalAuto (the key absent): every step where the job can restart and an agent
  // holds the memory, else none (ResolveSnapshotInterval, runtime/train/checkpoint_schedule.h).
  int64_t snapshot_interval = -1;
  // Peer nodes each snapshot is copied to, into their agents' memory (docs/checkpoint.md, "Copies
  // on peer nodes"): 0..snapshot::kMaxReplicas, as many as the job has other nodes.
  int snapshot_replicas = 1;
  // Generation > 0: a restart, which restores from in-memory snapshots first.
  bool restarted = false;
};

inline constexpr int64_t kSnapshotIntervalAuto = -1;

}  // namespace dslaunch::runtime
