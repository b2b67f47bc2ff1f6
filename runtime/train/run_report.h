// RunReport: everything rank 0 of a training run prints and records, behind one object: the
// progress lines (the model, the resume, every steps_per_print steps, validations, loss-scale
// events, the stop, the sample, the checkpoint summary), the metrics records (docs/engine.md,
// "Metrics"; JSON objects built with nlohmann_json, numbers with 9 significant digits) and the
// progress bar. The training loop tells it what happened, as data; the report decides what to
// write. Ranks other than 0 get a silent report (RunReport::ForRank), which writes nothing, so
// the loop asks no rank questions.
//
// Time is an input: the loop passes the clock's readings, so tests drive the throughput figures.
// Not thread-safe: the training thread reports.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/engine/engine.h"

namespace dslaunch::runtime {

// Where rank 0's output goes; each may be empty (nothing is written there).
struct ReportOutputs {
  std::function<void(const std::string&)> print;     // one progress line, without newline
  std::function<void(const std::string&)> metrics;   // one metrics record (a JSON object) per call
  std::function<void(const std::string&)> progress;  // the progress bar (runtime/train/progress_bar.h)
  std::function<void(int64_t first_step)> first_step_done;  // once, after the first step's record
};

// Where the run came from, for the `start` record and the report's "Command and config".
struct RunOrigin {
  std::vector<std::string> command;   // the worker's command line as it ran
  std::string config_json;            // the train.json's text as read ("" unknown); a JSON object
  std::optional<int64_t> started_ms;  // the worker's start, Unix ms
  // The node's OpenBLAS kernels and their rate on the model's products, and OpenBLAS's own
  // (runtime/train/kernel_choice.h); "" when unknown.
  std::string sgemm_kernel;
  double sgemm_gflops = 0.0;
  std::string sgemm_default_kernel;
  double sgemm_default_gflops = 0.0;
};

// What the run trains, for the start line and record.
struct RunStart {
  std::string model;  // "gpt", "mlp"
  int64_t parameters = 0;
  double flops_per_token = 0.0;  // forward + backward; per sample for a classifier
  bool classifier = false;       // counts samples, not tokens
  int world_size = 1;
  int zero_stage = 0;
  std::string precision;  // "fp32", "fp16", "bf16"
  MemoryStats memory;     // bytes per rank at the start
  size_t activation_bytes = 0;  // the model's activation buffers (TrainTask::ActivationBytes)
  RunOrigin origin;
};

// One completed optimizer step.
struct StepReport {
  int64_t step = 0;  // 1-based: the steps done
  float loss = 0.0f;  // mean over ranks
  StepStats stats;
  double seconds = 0.0;  // this step's wall time
  int64_t tokens = 0;    // tokens (samples for a classifier) in the global batch
  std::vector<double> rank_ms;  // every rank's time of this step, rank order; empty: not recorded
  std::vector<double> rank_collective_ms;  // the part of it inside collectives, the same order
  double snapshot_seconds = -1.0;  // rank 0's in-memory snapshot after this step; < 0: none taken
  // A snapshot was due after this step and waited: some rank's previous one was still being
  // copied to its peer nodes (docs/checkpoint.md, "Copies on peer nodes").
  bool snapshot_deferred = false;
};

struct ValidationReport {
  int64_t step = 0;  // steps done before it
  double loss = 0.0;  // mean over ranks
  std::optional<double> accuracy;  // the classifier's, a fraction
  int64_t batches = 0;             // per rank
};

struct RunEnd {
  int64_t steps = 0;
  int64_t applied_steps = 0;
  MemoryStats memory;  // with the working high-water mark
  size_t checkpoints_saved = 0;
  size_t checkpoints_failed = 0;
  swap::IoStats swap_io;  // rank 0's swap-file I/O; the record has it when any byte moved
};

// The `exit` record, written by the worker after its run, whatever its end (finished, stopped,
// failed): {"event":"exit","ended_ms":N}, N in Unix ms. With the `start` record's started_ms it
// gives the run's wall time.
std::string ExitRecordJson(int64_t ended_ms);

class RunReport {
 public:
  using Clock = std::chrono::steady_clock;

  // Rank 0's report writes to `outputs`; any other rank's writes nothing. A step line is printed
  // every `steps_per_print` steps (>= 1) and after step `total_steps`.
  static RunReport ForRank(int rank, ReportOutputs outputs, int64_t steps_per_print, int64_t total_steps);

  // "model initialised from PATH".
  void ModelInitialisedFrom(const std::string& path);
  // The model line and the `start` record.
  void Start(const RunStart& start);
  // The resume line and the `resume` record; `restart` prefixes "restart: " (a restart resuming
  // on its own, checkpoint.resume_newest).
  void Resumed(const std::string& path, const LoadResult& loaded, bool restart, bool from_memory = false);
  // A restart found no in-memory snapshot to restore (`why`): "restart: no complete in-memory
  // snapshot (WHY): ...", then checkpoint.dir `dir` is used, or (empty) the run starts at step 0.
  void NoMemorySnapshot(const std::string& why, const std::string& dir);
  // "no checkpoint in DIR yet: starting at step 0".
  void NoCheckpointYet(const std::string& dir, bool restart);
  // "REASON: looking for the newest complete checkpoint in DIR": `latest` was not usable
  // (runtime/checkpoint/resume_plan.h).
  void ScanningForCheckpoints(const std::string& reason, const std::string& dir, bool restart);
  // "skipping checkpoint PATH: WHY" and a `checkpoint_skipped` record: a damaged or corrupt
  // checkpoint passed over for the next older one.
  void CheckpointSkipped(const std::string& path, const std::string& why, bool restart);
  // One line as given (the removal of a crash's leftovers at start-up).
  void CheckpointNote(const std::string& line);
  // Training starts at `now`, `first_step` steps already done: the clock of the throughput.
  void TrainingStarts(int64_t first_step, Clock::time_point now);
  // After every step, at `now`: the `step` record, the first step's callback, the loss-scale
  // event, the progress bar, and every steps_per_print steps (and after the last) the step line
  // with the throughput since the previous one.
  void Step(const StepReport& step, Clock::time_point now);
  // The validation line and record; `spent` (the validation's time) is not training time: it is
  // left out of the next step line's throughput.
  void Validation(const ValidationReport& validation, Clock::duration spent);
  // "step N | stopped on request".
  void Stopped(int64_t step);
  // "sample:\nTEXT" and a `sample` record, TEXT with its control bytes escaped and invalid UTF-8
  // replaced (common/display_text.h): a model's bytes must not drive the terminal or the page.
  void Sample(const std::string& text);
  // The saver's summary line (runtime/checkpoint/saver.h); empty: nothing.
  void CheckpointSummary(const std::string& summary);
  // The `end` record.
  void End(const RunEnd& end);

  // Records the checkpoint saver's own events: rank 0's metrics output, empty on a silent report.
  const std::function<void(const std::string&)>& recorder() const { return out_.metrics; }

 private:
  RunReport(ReportOutputs outputs, int64_t steps_per_print, int64_t total_steps);
  void Print(const std::string& line) const;
  void PrintStepLine(const StepReport& step, Clock::time_point now);

  ReportOutputs out_;  // all empty on a silent report
  int64_t steps_per_print_;
  int64_t total_steps_;
  std::string unit_ = "tokens";  // what the throughput counts
  int64_t first_step_ = 0;
  Clock::time_point train_start_{};
  Clock::time_point last_print_{};
  int64_t tokens_since_print_ = 0;
};

}  // namespace dslaunch::runtime
