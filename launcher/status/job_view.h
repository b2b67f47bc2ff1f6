// JobView: what the launcher knows about a running job, as plain data, for the people and programs
// that look at it: the live page and its JSON, /metrics, `dslaunch status`, the straggler warning
// (docs/observability.md). The launcher's status feed (launcher/job/status_feed.h) keeps one JobStatus
// (launcher/status/job_status.h) up to date from the events it already handles (agents, workers,
// heartbeats, progress reports) and hands out a JobView copy; renderers are pure functions of it.
//
// Times are Unix milliseconds (0 = never); figures that were never reported are empty optionals,
// and renderers show them as empty, never as 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/process_grid.h"

namespace dslaunch::launcher {

// A rank as the launcher last heard of it. `state` is one of the names of RankStateName
// (job_status.h): "pending", "running", "exited" (code 0), "failed", "stalled", "stopped".
struct RankView {
  int rank = 0;
  int local_rank = 0;
  int node_rank = 0;
  std::string host;
  int64_t pid = 0;  // 0 until WORKER_STARTED
  std::string state = "pending";
  std::optional<int> exit_code;  // set once it exited
  std::string exit_text;         // "exit 1", "signal 9 (SIGKILL)", ... ("" while running)
  std::string log_path;          // its log file on its node
  // Its place in the model's process grid (docs/parallelism.md, "The grid"): unset unless the
  // train.json splits the model into stages or over tensor ranks.
  std::optional<GridCoordinates> grid;
  // From its progress reports (runtime/train/progress_report.h): the last step it completed and
  // what it said about it.
  int64_t last_step = -1;
  std::optional<double> step_ms;       // wall time of that step
  std::optional<double> compute_ms;    // of it, the time outside collectives (what the straggler rule compares)
  std::optional<double> loss;
  std::optional<double> tokens_per_s;
  int64_t last_report_ms = 0;  // when the launcher received its last report
  bool straggler = false;     // flagged by the straggler rule (docs/observability.md)
  // While flagged, why and since when: its median step time and its peers' median at its latest
  // check, the step whose check flagged it and when the launcher saw that (Unix ms).
  std::optional<double> straggler_median_ms;
  std::optional<double> straggler_peers_median_ms;
  int64_t straggler_since_step = -1;
  int64_t straggler_since_ms = 0;
};

struct NodeView {
  int node_rank = 0;
  std::string host;
  int64_t last_heartbeat_ms = 0;  // last HEARTBEAT or message from its agent
  bool connected = false;
};

// One point of a curve: a step and its value.
struct SeriesPoint {
  int64_t step = 0;
  double value = 0;
};

struct JobView {
  std::string job_id;
  std::vector<std::string> command;  // the program and its arguments as the user gave them
  std::string state;                 // JobStateName (launcher/elastic/job_tracker.h): "starting", "running", ...
  int generation = 0;
  int restarts = 0;                  // generations started after the first
  int64_t started_ms = 0;            // when the launcher started
  int64_t now_ms = 0;                // when this view was taken (uptime = now_ms - started_ms)
  std::optional<int> exit_code;      // the job's, once finished
  // Once finished: "succeeded" (exit 0), "stopped" (the launcher was told to stop: a signal),
  // "failed" (anything else: JobOutcomeName, job_status.h); "" before. And when it finished.
  std::string outcome;
  int64_t ended_ms = 0;
  std::string root_cause;            // the one-line reason it stopped early, "" if none
  std::vector<NodeView> nodes;
  std::vector<RankView> ranks;
  // The generation's process grid (its plan's, launcher/plan/model_grid.h); unset without one.
  std::optional<GridShape> grid;
  // Curves from rank 0's reports (every rank trains the same model on its own batches; rank 0 is
  // what the runtime's own log reports): loss, validation loss, tokens/s of the whole job.
  std::vector<SeriesPoint> loss;
  std::vector<SeriesPoint> val_loss;
  std::vector<SeriesPoint> tokens_per_s;
  // The straggler rule in force (launcher/status/straggler_detector.h); factor 0: off.
  double straggler_factor = 0;
  double straggler_margin_ms = 0;
  int straggler_window = 0;
  int straggler_patience = 0;
  // Counters for /metrics.
  int64_t stragglers_total = 0;          // times a rank was flagged since the start
  int64_t checkpoint_saves_total = 0;
  std::optional<double> checkpoint_save_seconds;  // the last save's duration
  std::optional<int64_t> checkpoint_save_bytes;   // the last save's bytes
  int64_t store_bytes_sent_total = 0;    // bytes the endpoint sent to clients (store and agents)
};

}  // namespace dslaunch::launcher
