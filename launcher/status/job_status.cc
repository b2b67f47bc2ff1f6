#include "launcher/status/job_status.h"

#include <type_traits>
#include <utility>
#include <variant>

namespace dslaunch::launcher {

std::string_view RankStateName(RankState state) {
  switch (state) {
    case RankState::kPending: return "pending";
    case RankState::kRunning: return "running";
    case RankState::kExited: return "exited";
    case RankState::kFailed: return "failed";
    case RankState::kStalled: return "stalled";
    case RankState::kStopped: return "stopped";
  }
  return "unknown";
}

std::string_view JobOutcomeName(int exit_code, std::optional<RootCause::Kind> cause) {
  if (exit_code == 0) return "succeeded";
  if (cause == RootCause::Kind::kSignal) return "stopped";
  return "failed";
}

JobStatus::JobStatus(std::string job_id, std::vector<std::string> command, int64_t started_ms,
                     StragglerOptions stragglers)
    : stragglers_(stragglers) {
  view_.job_id = std::move(job_id);
  view_.command = std::move(command);
  view_.started_ms = started_ms;
  view_.state = std::string(JobStateName(JobState::kStarting));
  if (stragglers_.enabled()) {
    const StragglerOptions& rule = stragglers_.options();
    view_.straggler_factor = rule.factor;
    view_.straggler_margin_ms = rule.margin_ms;
    view_.straggler_window = rule.window;
    view_.straggler_patience = rule.patience;
  }
}

void JobStatus::OnGeneration(const LaunchPlan& plan) {
  // The first generation may have a number above 0 (a requeued job's restart count): restarts are
  // counted from it.
  if (!first_generation_) first_generation_ = plan.generation;
  view_.restarts = plan.generation - *first_generation_;
  view_.generation = plan.generation;
  view_.state = std::string(JobStateName(JobState::kStarting));
  view_.nodes.clear();
  view_.ranks.clear();
  view_.grid = plan.grid ? std::optional<GridShape>(plan.grid->shape()) : std::nullopt;
  rank_index_.clear();
  node_index_.clear();
  for (const NodePlan& node : plan.nodes) {
    node_index_[node.node_rank] = view_.nodes.size();
    view_.nodes.push_back(NodeView{node.node_rank, node.host, 0, false});
    for (const WorkerPlan& worker : node.workers) {
      RankView r;
      r.rank = worker.rank;
      r.local_rank = worker.local_rank;
      r.node_rank = node.node_rank;
      r.host = node.host;
      if (plan.grid) r.grid = plan.grid->CoordinatesOf(worker.rank);
      rank_index_[worker.rank] = view_.ranks.size();
      view_.ranks.push_back(std::move(r));
    }
  }
  stragglers_.Reset();
}

RankView* JobStatus::FindRank(int rank) {
  auto it = rank_index_.find(rank);
  return it == rank_index_.end() ? nullptr : &view_.ranks[it->second];
}

NodeView* JobStatus::FindNode(int node_rank) {
  auto it = node_index_.find(node_rank);
  return it == node_index_.end() ? nullptr : &view_.nodes[it->second];
}

void JobStatus::OnAgentHeard(int node_rank, int64_t now_ms) {
  if (NodeView* n = FindNode(node_rank)) {
    n->connected = true;
    n->last_heartbeat_ms = now_ms;
  }
}

void JobStatus::OnAgentLost(int node_rank) {
  if (NodeView* n = FindNode(node_rank)) n->connected = false;
}

void JobStatus::OnWorkerStarted(const control::WorkerStarted& started) {
  RankView* r = FindRank(started.rank);
  if (r == nullptr) return;
  r->pid = started.pid;
  r->state = std::string(RankStateName(RankState::kRunning));
  if (!started.log_path.empty()) r->log_path = started.log_path;
}

void JobStatus::OnWorkerExited(const control::WorkerExited& exited) {
  RankView* r = FindRank(exited.rank);
  if (r == nullptr) return;
  if (exited.pid != 0) r->pid = exited.pid;
  r->exit_code = ShellExitCode(exited.status);
  r->exit_text = DescribeExitStatus(exited.status);
  if (!exited.log_path.empty()) r->log_path = exited.log_path;
  if (exited.last_step > r->last_step) r->last_step = exited.last_step;
  // A stalled rank stays "stalled": its SIGKILL exit is the agent's doing, not its own.
  if (r->state == RankStateName(RankState::kStalled)) return;
  const RankState state = exited.status.success() ? RankState::kExited
                          : exited.stopped        ? RankState::kStopped
                                                  : RankState::kFailed;
  r->state = std::string(RankStateName(state));
}

void JobStatus::OnWorkerStalled(const control::WorkerStalled& stalled) {
  if (RankView* r = FindRank(stalled.rank)) r->state = std::string(RankStateName(RankState::kStalled));
}

std::optional<StragglerChange> JobStatus::OnProgress(const control::WorkerProgress& p, int64_t now_ms) {
  RankView* r = FindRank(p.rank);
  if (r == nullptr) return std::nullopt;
  r->last_report_ms = now_ms;
  const bool new_step = p.step >= 0 && p.step > r->last_step;
  if (p.step >= 0) r->last_step = p.step;
  // Step figures describe the report's step: taken as they come (the runtime repeats them).
  if (p.figures.step_ms) r->step_ms = p.figures.step_ms;
  if (p.figures.compute_ms) r->compute_ms = p.figures.compute_ms;
  if (p.figures.loss) r->loss = p.figures.loss;
  if (p.figures.tokens_per_s) r->tokens_per_s = p.figures.tokens_per_s;
  if (p.rank == 0) OnRankZeroReport(p, new_step);
  // The time outside collectives when given: waiting for a straggler makes every rank's step as
  // long as the straggler's.
  const std::optional<double> step_time = p.figures.compute_ms ? p.figures.compute_ms : p.figures.step_ms;
  if (!new_step || !step_time) return std::nullopt;
  std::optional<StragglerChange> change = stragglers_.AddStepTime(p.rank, p.step, *step_time);
  // While flagged the page shows the latest medians, not those of the check that flagged it.
  if (std::optional<Straggler> now = stragglers_.Flagged(p.rank)) {
    r->straggler_median_ms = now->median_ms;
    r->straggler_peers_median_ms = now->peers_median_ms;
  }
  if (!change) return std::nullopt;
  change->straggler.host = r->host;
  if (change->kind == StragglerChange::Kind::kFlagged) {
    r->straggler = true;
    r->straggler_since_step = change->straggler.since_step;
    r->straggler_since_ms = now_ms;
    ++view_.stragglers_total;
  } else {
    r->straggler = false;
    r->straggler_median_ms.reset();
    r->straggler_peers_median_ms.reset();
    r->straggler_since_step = -1;
    r->straggler_since_ms = 0;
  }
  return change;
}

// Rank 0 speaks for the job's curves and checkpoints (every rank trains the same model).
void JobStatus::OnRankZeroReport(const control::WorkerProgress& p, bool new_step) {
  const ProgressFigures& f = p.figures;
  if (new_step && f.loss) loss_.Add({p.step, *f.loss});
  if (new_step && f.tokens_per_s) tokens_per_s_.Add({p.step, *f.tokens_per_s});
  if (f.val_loss) {
    const std::pair<int64_t, double> val{f.val_step.value_or(p.step), *f.val_loss};
    if (val != last_val_) {
      last_val_ = val;
      val_loss_.Add({val.first, val.second});
    }
  }
  OnCheckpoint(f, p.step);
}

void JobStatus::OnCheckpoint(const ProgressFigures& f, int64_t step) {
  if (!f.ckpt_s && !f.ckpt_bytes && !f.ckpt_step) return;
  ProgressFigures ckpt;
  ckpt.ckpt_s = f.ckpt_s;
  ckpt.ckpt_bytes = f.ckpt_bytes;
  ckpt.ckpt_step = f.ckpt_step ? f.ckpt_step : std::optional<int64_t>(step);
  if (ckpt == last_ckpt_) return;
  last_ckpt_ = ckpt;
  ++view_.checkpoint_saves_total;
  view_.checkpoint_save_seconds = f.ckpt_s;
  view_.checkpoint_save_bytes = f.ckpt_bytes;
}

std::optional<StragglerChange> JobStatus::OnAgentMessage(int node_rank, int generation, const control::Message& message,
                                                   int64_t now_ms) {
  OnAgentHeard(node_rank, now_ms);
  std::optional<StragglerChange> straggler;
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, control::WorkerStarted> || std::is_same_v<T, control::WorkerExited> ||
                      std::is_same_v<T, control::WorkerStalled> || std::is_same_v<T, control::WorkerProgress>) {
          if (m.generation != generation) return;  // a stale peer is never trusted
          if constexpr (std::is_same_v<T, control::WorkerStarted>) OnWorkerStarted(m);
          if constexpr (std::is_same_v<T, control::WorkerExited>) OnWorkerExited(m);
          if constexpr (std::is_same_v<T, control::WorkerStalled>) OnWorkerStalled(m);
          if constexpr (std::is_same_v<T, control::WorkerProgress>) straggler = OnProgress(m, now_ms);
        }
      },
      message);
  return straggler;
}

void JobStatus::OnJobState(JobState state) { view_.state = std::string(JobStateName(state)); }

void JobStatus::OnRootCause(const std::string& line) {
  if (view_.root_cause.empty()) view_.root_cause = line;
}

void JobStatus::OnFinished(int exit_code, std::optional<RootCause::Kind> cause, int64_t now_ms) {
  view_.state = std::string(JobStateName(JobState::kFinished));
  view_.exit_code = exit_code;
  view_.outcome = std::string(JobOutcomeName(exit_code, cause));
  view_.ended_ms = now_ms;
}

JobView JobStatus::View(int64_t now_ms) const {
  JobView v = view_;
  v.now_ms = now_ms;
  v.loss = loss_.Points();
  v.val_loss = val_loss_.Points();
  v.tokens_per_s = tokens_per_s_.Points();
  return v;
}

}  // namespace dslaunch::launcher
