// JobStatus: the launcher's running account of a job for the people and programs that look at it
// (docs/observability.md): fed by the events the launcher's shell (launcher/job/status_feed.h) already
// handles (the plan of each generation, agents heard and lost, workers started, exited and
// stalled, progress reports, the job's state and end), it makes the JobView of
// launcher/status/job_view.h and runs the straggler rule (launcher/status/straggler_detector.h).
// Pure: time is an argument (Unix milliseconds), no I/O. Not thread-safe: the shell's thread owns
// it and publishes copies of the view (launcher/status/job_board.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/control_messages.h"
#include "launcher/elastic/job_tracker.h"
#include "launcher/plan/launch_plan.h"
#include "launcher/status/bounded_series.h"
#include "launcher/status/job_view.h"
#include "launcher/status/straggler_detector.h"

namespace dslaunch::launcher {

enum class RankState { kPending, kRunning, kExited, kFailed, kStalled, kStopped };
// "pending", "running", "exited" (code 0), "failed", "stalled" (killed by the agent's watchdog),
// "stopped" (ended because the launcher stopped the job).
std::string_view RankStateName(RankState state);

// How a finished job ended, for people (JobView::outcome): "succeeded" when it exits 0,
// "stopped" when the launcher was told to stop (its root cause is a signal: SIGTERM, SIGINT,
// SIGUSR1's requeue), "failed" otherwise (a rank failed or hung, a node was lost, start-up
// failed), whatever the exit code says of the class.
std::string_view JobOutcomeName(int exit_code, std::optional<RootCause::Kind> cause);

class JobStatus {
 public:
  // `command`: the program and its arguments as the user gave them; `started_ms`: when the
  // launcher started.
  JobStatus(std::string job_id, std::vector<std::string> command, int64_t started_ms,
            StragglerOptions stragglers = {});

  // A generation starts with this plan: its ranks (pending), hosts and nodes replace the last
  // generation's; the straggler windows start afresh. Curves and counters carry on.
  void OnGeneration(const LaunchPlan& plan);

  // Any message or heartbeat from the agent of `node_rank` (of the current plan).
  void OnAgentHeard(int node_rank, int64_t now_ms);
  void OnAgentLost(int node_rank);

  void OnWorkerStarted(const control::WorkerStarted& started);
  void OnWorkerExited(const control::WorkerExited& exited);
  void OnWorkerStalled(const control::WorkerStalled& stalled);

  // A progress report. Returns the change its step time made to the rank's straggler flag
  // (flagged or cleared: the caller prints it, DescribeStraggler), already in the view.
  std::optional<StragglerChange> OnProgress(const control::WorkerProgress& progress, int64_t now_ms);

  void OnJobState(JobState state);
  // The first root cause of the job (DescribeRootCause's line); later ones are ignored.
  void OnRootCause(const std::string& line);
  // The job ended with `exit_code` at `now_ms`; `cause`: the kind of its root cause, if any.
  void OnFinished(int exit_code, std::optional<RootCause::Kind> cause, int64_t now_ms);

  // Bytes the endpoint has sent to its clients so far.
  void SetStoreBytesSent(int64_t bytes) { view_.store_bytes_sent_total = bytes; }

  // A message from the agent of `node_rank` in generation `generation` (the current one): the
  // agent was heard, and WORKER_STARTED, WORKER_EXITED, WORKER_STALLED and WORKER_PROGRESS of that
  // generation go to the calls above (a message of another generation only says the agent lives).
  // Returns what OnProgress returns.
  std::optional<StragglerChange> OnAgentMessage(int node_rank, int generation, const control::Message& message,
                                          int64_t now_ms);

  // The view at `now_ms`.
  JobView View(int64_t now_ms) const;

 private:
  RankView* FindRank(int rank);
  NodeView* FindNode(int node_rank);
  void OnRankZeroReport(const control::WorkerProgress& progress, bool new_step);
  void OnCheckpoint(const ProgressFigures& figures, int64_t step);

  JobView view_;  // ranks, nodes, counters; curves are filled in by View()
  StragglerDetector stragglers_;
  BoundedSeries loss_, val_loss_, tokens_per_s_;
  // The last validation and checkpoint seen, so that a figure repeated in every report counts once.
  std::optional<std::pair<int64_t, double>> last_val_;
  std::optional<ProgressFigures> last_ckpt_;
  std::map<int, size_t> rank_index_;  // rank -> index in view_.ranks
  // node rank -> index in view_.nodes: every agent message finds its node without a scan (a scan
  // made the launcher's work per message grow with the nodes: quadratic at 12,500 nodes).
  std::map<int, size_t> node_index_;
  std::optional<int> first_generation_;
};

}  // namespace dslaunch::launcher
