// MetricsLog: what the report draws from a job's metrics.jsonl (docs/engine.md, "Metrics"), read
// from the file's text. Pure: no files, no clock.
//
// The file is the job's story across generations: each worker run (generation) writes a `start`
// record, then its `resume`, `step`, `validation`, `generation`, `checkpoint` and `end` records. A
// run is a segment here, from one `start` to the next. Lines that are not a JSON object with a
// string `event` (a torn last line after SIGKILL, an editor's damage), and `step`/`validation`
// records without an integer `step`, are skipped and counted (decision in docs/observability.md,
// "Report at the end"): a report of the rest is more useful than none. Unknown events and fields
// are ignored, so a newer runtime's file still reads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dslaunch::report {

// One `step` record. Non-finite values (written as null) are NaN here.
struct StepPoint {
  int64_t step = 0;
  double loss = 0.0;
  double tokens_per_s = 0.0;
  double ms_per_step = 0.0;
  double lr = 0.0;                    // the learning rate the step used
  double grad_norm = 0.0;             // unscaled; NaN when it overflowed
  double loss_scale = 0.0;            // the fp16 loss scale (1 in fp32 and bf16)
  bool skipped = false;               // fp16: the step overflowed and was not applied
  std::vector<double> rank_step_ms;   // per rank, rank order; empty from a runtime without it
  std::vector<double> rank_collective_ms;  // the part of it inside collectives, the same order
  int segment = 0;                    // index into MetricsLog::segments
};

// One `validation` record.
struct ValidationPoint {
  int64_t step = 0;
  double val_loss = 0.0;
  std::optional<double> accuracy;
  int segment = 0;
};

// One worker run: a `start` record and what followed it up to the next `start`.
struct RunSegment {
  std::string model;
  int64_t parameters = 0;
  int world_size = 0;
  int zero_stage = 0;
  std::string precision;
  std::optional<int64_t> generation;     // from its `generation` record (written after the first step)
  std::string reason;                     // why it started ("start" at generation 0)
  std::optional<int64_t> resumed_step;    // from its `resume` record
  std::optional<double> seconds_lost;     // a restart's time from the fault to its first step
  int64_t steps_recorded = 0;
  int64_t first_step = 0;                 // of its step records (valid when steps_recorded > 0)
  int64_t last_step = 0;
  double last_loss = 0.0;                 // NaN when non-finite
  int64_t nonfinite_losses = 0;
  int64_t skipped_steps = 0;
  int64_t checkpoints = 0;                // `checkpoint` records
  int64_t checkpoints_failed = 0;         // `checkpoint_failed` records
  bool ended = false;                     // an `end` record: the run finished its steps
  // From the `start` record (a runtime from before them writes none): the worker's start (Unix
  // ms), its command line, its train.json (pretty-printed JSON); from the `exit` record the end of
  // its run, whatever the end; from a `sample` record the generated text (escaped by the writer).
  std::optional<int64_t> started_ms;
  std::optional<int64_t> ended_ms;
  // From the `start` record: the OpenBLAS kernels the run's node chose and their GFLOP/s on the
  // model's products ("" and NaN when not recorded).
  std::string sgemm_kernel;
  double sgemm_gflops = 0.0;
  std::vector<std::string> command;
  std::string config;
  std::optional<std::string> sample;
};

// A line skipped, 1-based.
struct MalformedLine {
  int64_t line = 0;
  std::string reason;
};

struct MetricsLog {
  std::vector<RunSegment> segments;
  std::vector<StepPoint> steps;            // file order (a restart may repeat steps)
  std::vector<ValidationPoint> validations;
  int64_t lines = 0;                       // non-empty lines read
  int64_t malformed = 0;                   // lines skipped
  std::optional<MalformedLine> first_malformed;
};

// Reads the text of a metrics.jsonl. Never fails: what cannot be read is counted in `malformed`.
// Records before the first `start` (a file cut at its head) open a segment of their own.
MetricsLog ParseMetricsLog(std::string_view text);

}  // namespace dslaunch::report
