// The training loop of dslaunch-worker: data -> model -> engine, step after step, with rank 0
// printing progress. Everything it touches is passed in (config, communicator, data, output
// functions), so tests run it with the in-process communicator.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/memory_snapshot.h"
#include "runtime/comm/communicator.h"
#include "runtime/config/train_config.h"
#include "runtime/train/progress_report.h"
#include "runtime/train/run_report.h"
#include "runtime/train/train_task.h"

namespace dslaunch::runtime {

class DeviceTraining;

struct TrainResult {
  int64_t first_step = 0;      // steps done before this run (from a checkpoint)
  std::vector<double> losses;  // mean training loss of each step run, averaged over ranks
  double val_loss = -1.0;      // after the last step; -1 without validation data
  bool stopped = false;        // ended early by TrainHooks::stop
  std::vector<std::string> checkpoints;  // saved, in order
  std::vector<int64_t> failed_checkpoints;  // steps whose asynchronous periodic save failed
};

// The loop's connections to the process: where rank 0's output goes (other ranks call none of
// the output functions, except `print` for a checkpoint shard of their own that failed), the
// stop request, and the checkpoint saves' file system.
struct TrainHooks {
  std::function<void(const std::string&)> print;     // progress lines, without newline
  std::function<void(const std::string&)> metrics;   // one JSON object per call (docs/engine.md, "Metrics"); optional
  std::function<void(const std::string&)> progress;  // the progress bar after each step (runtime/train/progress_bar.h); optional
  // Set (by a SIGTERM handler) when the job is told to stop: after the current step every rank
  // saves a checkpoint (with checkpoint.save_on_stop) and Train returns with `stopped`.
  const std::atomic<bool>* stop = nullptr;
  // Every rank: progress reports for hang detection (runtime/train/progress_report.h): at start-up (with
  // the step resumed), after every step, per validation batch, and around checkpoint save and load
  // and the sample. Optional; must outlive Train.
  ProgressReporter* reporter = nullptr;
  // Rank 0, once: the first step of this run completed; called with the step it started from (the
  // resumed checkpoint's, 0 for a fresh start), after that step's metrics record. Optional.
  std::function<void(int64_t first_step)> first_step_done;
  // The file system checkpoint saves write through; null: the real one. The crash tests pass a
  // FaultInjectingFileSystem (runtime/checkpoint/fault_injecting_file_system.h). Must outlive Train.
  FileSystem* checkpoint_files = nullptr;
  // Rank 0, before it publishes a checkpoint: is this generation still the job's current one
  // (SaveOptions::fence)? Empty: not checked.
  std::function<Status()> checkpoint_fence;
  // Where the run came from, for rank 0's `start` record (RunReport). Optional.
  RunOrigin origin;
  // This rank's in-memory snapshot slots, held by its agent (docs/checkpoint.md, "Snapshots in
  // memory"), written every `snapshot_interval` steps (> 0); a restart (generation > 0) restores
  // from them before it looks at checkpoint.dir. Null: none. Must outlive Train.
  MemorySnapshots* snapshots = nullptr;
  int64_t snapshot_interval = 0;
  // Every rank, after each step (and its snapshot): the steps done. The worker's crash hook for
  // tests (DSLAUNCH_CRASH_AFTER_STEP). Optional.
  std::function<void(int64_t step)> after_step;
  // A model split into pipeline stages (config.pipeline.stages > 1): this rank's groups. Null:
  // data parallel over Train's communicator. Must outlive Train.
  const ModelParallelRun* model_parallel = nullptr;
  // Training on an accelerator (runtime/train/device_training.h): the engine, the micro-steps, the
  // validation and the sample on the device. Null: on the CPU. Must outlive Train.
  DeviceTraining* device = nullptr;
};

// Runs config.train.steps optimizer steps of the configured model (gpt or mlp, runtime/train/train_task.h)
// with a validation pass every train.eval_interval steps and after the last, then for gpt a
// sample of train.sample_tokens tokens, saving checkpoints when runtime/train/checkpoint_schedule.h
// says. It starts from the checkpoint the resume plan picks (runtime/checkpoint/resume.h: the
// newest complete one for `load: auto` and restarts, skipping damaged or corrupt ones with a line
// each), and rank 0 then removes the unfinished step directories of checkpoint.dir, one line each. Rank 0 reports through the hooks (runtime/train/run_report.h): progress lines (the start,
// every steps_per_print steps, validations, loss-scale events, the sample), metrics records
// (start, each step, each validation, end) and the progress bar. Fails with the first
// error: no checkpoint that can be resumed where the plan needs one, a run without `load` over a
// checkpoint.dir that holds checkpoints, a collective that failed (naming the peer), data that
// does not fit the model, fp16 overflowing at the minimum loss scale, a diverged fp32/bf16 run, a failed synchronous periodic
// save, and a failed final save (at the end or on stop; the message names the save, its step,
// directory and reason). A failed asynchronous periodic save is not an error: it is printed,
// recorded, counted in `failed_checkpoints` and in the summary line at the end
// (runtime/checkpoint/saver.h).
Result<TrainResult> Train(const TrainConfig& config, const TrainData& data, Communicator& comm,
                          const TrainHooks& hooks);
// The same with progress lines only (and metrics when given).
Result<TrainResult> Train(const TrainConfig& config, const TrainData& data, Communicator& comm,
                          const std::function<void(const std::string&)>& print,
                          const std::function<void(const std::string&)>& metrics = {});

}  // namespace dslaunch::runtime
