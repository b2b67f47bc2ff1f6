#include "launcher/elastic/job_tracker.h"

#include <csignal>

#include "common/check.h"
#include "common/exit_codes.h"

namespace dslaunch::launcher {

bool IsLegalTransition(JobState from, JobState to) {
  switch (from) {
    case JobState::kStarting:
      return to == JobState::kRunning || to == JobState::kStopping || to == JobState::kFinished;
    case JobState::kRunning:
      return to == JobState::kStopping || to == JobState::kFinished;
    case JobState::kStopping:
      return to == JobState::kFinished;
    case JobState::kFinished:
      return false;
  }
  return false;
}

std::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kStarting: return "starting";
    case JobState::kRunning: return "running";
    case JobState::kStopping: return "stopping";
    case JobState::kFinished: return "finished";
  }
  return "?";
}

JobTracker::JobTracker(const LaunchPlan& plan) {
  for (const auto& n : plan.nodes) nodes_.push_back(Node{n.host, false, false});
}

RootCause JobTracker::CauseAt(RootCause::Kind kind, int node_rank) const {
  RootCause cause;
  cause.kind = kind;
  cause.node_rank = node_rank;
  cause.host = nodes_[node_rank].host;
  return cause;
}

void JobTracker::Transition(JobState to) {
  DSLAUNCH_CHECK(IsLegalTransition(state_, to))
      << "job: illegal transition " << JobStateName(state_) << " -> " << JobStateName(to);
  state_ = to;
}

Action JobTracker::OnAgentRegistered(int node_rank) {
  Node& node = nodes_[node_rank];
  if (!node.registered) {
    node.registered = true;
    ++registered_count_;
  }
  if (state_ != JobState::kStarting || registered_count_ < nodes_.size()) return Action::kNone;
  Transition(JobState::kRunning);
  return Action::kNone;
}

namespace {

// True when `later`, a failure seen after `current` became the root cause, is the original
// failure that `current` only reacted to.
bool IsOriginalOf(const std::optional<ErrorRecord>& later, const std::optional<ErrorRecord>& current) {
  if (!later || later->caused_by_peer || !current || !current->caused_by_peer) return false;
  return later->time_ns == 0 || current->time_ns == 0 || later->time_ns <= current->time_ns;
}

}  // namespace

Action JobTracker::OnWorkerExited(int node_rank, const control::WorkerExited& exited) {
  if (exited.status.success() || state_ == JobState::kFinished) return Action::kNone;
  std::optional<ErrorRecord> record;
  if (!exited.error_record.empty()) {
    // A record that cannot be read is no evidence either way.
    if (auto parsed = ParseErrorRecord(exited.error_record); parsed.ok()) record = std::move(*parsed);
  }
  if (state_ == JobState::kStopping) {
    if (root_cause_ && root_cause_->kind == RootCause::Kind::kWorkerFailed && IsOriginalOf(record, root_cause_->error)) {
      root_cause_.reset();  // Fail() keeps the first cause it is given
    } else {
      return Action::kNone;
    }
  }
  // A failure while the job is not already stopping is a root cause even if the agent stopped
  // the worker on its own (the agent was signalled): the job cannot complete without it.
  RootCause cause = CauseAt(RootCause::Kind::kWorkerFailed, node_rank);
  cause.rank = exited.rank;
  cause.pid = exited.pid;
  cause.status = exited.status;
  cause.stderr_tail = exited.stderr_tail;
  cause.log_path = exited.log_path;
  cause.error = std::move(record);
  cause.last_step = exited.last_step;
  return Fail(std::move(cause));
}

Action JobTracker::OnWorkerStalled(int node_rank, const control::WorkerStalled& stalled) {
  if (state_ == JobState::kFinished) return Action::kNone;
  RootCause cause = CauseAt(RootCause::Kind::kWorkerStalled, node_rank);
  cause.rank = stalled.rank;
  cause.last_step = stalled.last_step;
  cause.silence_ms = stalled.silence_ms;
  cause.timeout_ms = stalled.timeout_ms;
  cause.process_state = stalled.state;
  stalled_.push_back(cause);
  auto stuck = [](const std::string& state) { return state == "stopped" || state == "disk sleep"; };
  if (root_cause_ && root_cause_->kind == RootCause::Kind::kWorkerFailed && root_cause_->error &&
      root_cause_->error->caused_by_peer) {
    root_cause_.reset();  // a peer's collateral failure gives way to the hang that caused it
  } else if (root_cause_ && root_cause_->kind == RootCause::Kind::kWorkerStalled &&
             !stuck(root_cause_->process_state) && stuck(cause.process_state)) {
    root_cause_.reset();  // a rank waiting in a collective gives way to the one it waits for
  }
  return Fail(std::move(cause));
}

Action JobTracker::OnRescale(std::string message) {
  if (state_ == JobState::kStopping || state_ == JobState::kFinished) return Action::kNone;
  RootCause cause;
  cause.kind = RootCause::Kind::kRescale;
  cause.message = std::move(message);
  return Fail(std::move(cause));
}

std::vector<int> JobTracker::unfinished_nodes() const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i].done) out.push_back(static_cast<int>(i));
  }
  return out;
}

Action JobTracker::OnAgentDone(int node_rank) {
  MarkDone(nodes_[node_rank]);
  return FinishIfAllDone();
}

Action JobTracker::OnAgentLost(int node_rank, std::string reason, std::optional<ExitStatus> status) {
  RootCause cause = CauseAt(RootCause::Kind::kAgentLost, node_rank);
  if (status) cause.status = *status;
  cause.message = std::move(reason);
  return OnNodeGone(node_rank, std::move(cause));
}

Action JobTracker::OnNodeGone(int node_rank, RootCause cause) {
  Node& node = nodes_[node_rank];
  if (node.done) return Action::kNone;
  // There is nothing more to hear from this node: it counts as done.
  MarkDone(node);
  lost_.push_back(node_rank);
  if (state_ == JobState::kStopping || state_ == JobState::kFinished) return FinishIfAllDone();
  Action a = Fail(std::move(cause));
  Action f = FinishIfAllDone();
  return f == Action::kFinish ? f : a;
}

Action JobTracker::OnAgentStopping(int node_rank, const control::AgentStopping& stopping) {
  if (state_ == JobState::kStopping || state_ == JobState::kFinished) return Action::kNone;
  RootCause cause = CauseAt(RootCause::Kind::kAgentStopped, node_rank);
  if (stopping.signal > 0) cause.status = ExitStatus::Signaled(stopping.signal);
  cause.message = stopping.reason;
  return Fail(std::move(cause));
}

Action JobTracker::OnAgentFailed(int node_rank, std::string reason) {
  RootCause cause = CauseAt(RootCause::Kind::kAgentFailed, node_rank);
  cause.message = std::move(reason);
  return OnNodeGone(node_rank, std::move(cause));  // the agent sends nothing after AGENT_FAILED
}

Action JobTracker::OnSignal(int signal) {
  if (state_ == JobState::kStopping && signal == SIGINT) return Action::kKillAll;
  if (state_ == JobState::kStopping || state_ == JobState::kFinished) return Action::kNone;
  RootCause cause;
  cause.kind = RootCause::Kind::kSignal;
  cause.status = ExitStatus::Signaled(signal);
  cause.message = "the launcher received " + SignalName(signal);
  if (signal == SIGUSR1) cause.message += " (stop for a requeue: workers save on SIGTERM)";
  return Fail(std::move(cause));
}

Action JobTracker::OnStartupFailed(std::string message) {
  if (state_ == JobState::kStopping || state_ == JobState::kFinished) return Action::kNone;
  RootCause cause;
  cause.kind = RootCause::Kind::kStartupFailed;
  cause.message = std::move(message);
  return Fail(std::move(cause));
}

Action JobTracker::OnStopDeadline() {
  if (state_ == JobState::kFinished) return Action::kNone;
  Transition(JobState::kFinished);
  return Action::kFinish;
}

Action JobTracker::Fail(RootCause cause) {
  if (!root_cause_) root_cause_ = std::move(cause);
  if (state_ == JobState::kStarting || state_ == JobState::kRunning) {
    Transition(JobState::kStopping);
    return Action::kStopAll;
  }
  return Action::kNone;
}

void JobTracker::MarkDone(Node& node) {
  if (node.done) return;
  node.done = true;
  ++done_count_;
}

Action JobTracker::FinishIfAllDone() {
  if (state_ == JobState::kFinished || done_count_ < nodes_.size()) return Action::kNone;
  Transition(JobState::kFinished);
  return Action::kFinish;
}

int JobTracker::ExitCode() const {
  // The classes are common/exit_codes.h's (docs/exit-codes.md).
  if (!root_cause_) return kExitSuccess;
  switch (root_cause_->kind) {
    case RootCause::Kind::kWorkerFailed:
      return ShellExitCode(root_cause_->status);
    case RootCause::Kind::kSignal:
      // SIGUSR1 asks for a stop with save-on-stop and a requeue (Slurm's --signal=USR1@T).
      if (root_cause_->status == ExitStatus::Signaled(SIGUSR1)) return kExitRequeue;
      return ShellExitCode(root_cause_->status);
    case RootCause::Kind::kWorkerStalled:
      // The agent killed the stalled rank: its code, as if it had died of SIGKILL.
      return ShellExitCode(ExitStatus::Signaled(SIGKILL));
    case RootCause::Kind::kRescale:
      return kExitInfrastructure;  // never the job's end: the next generation follows
    case RootCause::Kind::kAgentStopped:
      // Stopped by a signal to the agent (its node is being shut down, its pod deleted): a
      // disruption, 128+N like a signal to the launcher. Otherwise it lost the launcher.
      if (root_cause_->status.kind == ExitStatus::Kind::kSignaled) return ShellExitCode(root_cause_->status);
      return kExitInfrastructure;
    case RootCause::Kind::kAgentLost:
    case RootCause::Kind::kAgentFailed:
    case RootCause::Kind::kStartupFailed:
      return kExitInfrastructure;
  }
  return kExitInfrastructure;
}

}  // namespace dslaunch::launcher
