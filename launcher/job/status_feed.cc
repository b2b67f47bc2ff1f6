#include "launcher/job/status_feed.h"

#include "launcher/elastic/generation_outcome.h"

namespace dslaunch::launcher {

StatusFeed::StatusFeed(std::shared_ptr<JobBoard> board, StragglerOptions stragglers, JobLoop& loop, Console& console,
                       EventLog& events, StatusSource& source)
    : board_(std::move(board)),
      stragglers_(stragglers),
      loop_(loop),
      console_(console),
      events_(events),
      source_(source),
      publish_timer_(loop.NewTimer()) {}

// The launcher's view of the job: kept for the status board, and for the straggler rule, which
// runs on it even when nothing reads a board.
void StatusFeed::Open(const std::string& job_id, const ProgramSpec& program) {
  if (!board_ && stragglers_.factor <= 0) return;
  std::vector<std::string> command{program.program};
  command.insert(command.end(), program.args.begin(), program.args.end());
  status_.emplace(job_id, std::move(command), loop_.UnixMillis(), stragglers_);
}

void StatusFeed::OnGeneration(const LaunchPlan& plan) {
  if (!status_) return;
  status_->OnGeneration(plan);
  Publish();
}

void StatusFeed::OnAgentMessage(int node_rank, const control::Message& msg) {
  if (!status_) return;
  const int generation = source_.generation();
  if (const auto* output = std::get_if<control::Output>(&msg)) {
    if (output->generation != generation || !board_) return;
    for (const std::string& line : output->lines) {
      if (!control::IsTransientLine(line)) board_->AppendLog(output->rank, line);
    }
    return;  // output changes no view
  }
  if (auto change = status_->OnAgentMessage(node_rank, generation, msg, loop_.UnixMillis())) {
    const bool flagged = change->kind == StragglerChange::Kind::kFlagged;
    const auto* progress = std::get_if<control::WorkerProgress>(&msg);
    const std::string line = flagged ? DescribeStraggler(change->straggler, stragglers_)
                                     : DescribeStragglerCleared(change->straggler, progress ? progress->step : -1);
    console_.PrintError("dslaunch: " + line + "\n");
    events_.Record(generation, flagged ? "straggler" : "straggler_cleared", line);
  }
  Publish();  // a heartbeat's time is news too
}

void StatusFeed::OnAgentLost(int node_rank) {
  if (status_) status_->OnAgentLost(node_rank);
}

void StatusFeed::OnFinished(int exit_code) {
  if (!status_) return;
  // The root cause as the job ends: Publish reads it only while the job runs.
  std::optional<RootCause::Kind> cause;
  if (const JobTracker* tracker = source_.tracker(); tracker != nullptr && tracker->root_cause()) {
    cause = tracker->root_cause()->kind;
    status_->OnRootCause(DescribeRootCause(*tracker->root_cause()));
  }
  status_->OnFinished(exit_code, cause, loop_.UnixMillis());
  Publish();
  publish_timer_->Cancel();
}

void StatusFeed::Publish() {
  // Without a board (no status page) nobody reads a view: copying every rank's view each
  // kBoardPublishInterval would cost ~250 B per rank twice over, and the CPU of the copy.
  if (!status_ || !board_) return;
  const auto now = loop_.Now();
  const JobTracker* tracker = source_.tracker();
  const std::string state = tracker != nullptr ? std::string(JobStateName(tracker->state())) : "";
  const int generation = source_.generation();
  const bool changed = state != published_state_ || generation != published_generation_ || source_.finished();
  if (!changed && now - last_publish_ < kBoardPublishInterval) {
    if (publish_pending_) return;
    publish_pending_ = true;
    publish_timer_->At(last_publish_ + kBoardPublishInterval, [this] {
      publish_pending_ = false;
      Publish();
    });
    return;
  }
  published_state_ = state;
  published_generation_ = generation;
  last_publish_ = now;
  // The tracker's state and root cause are read when a view goes out, not on every message.
  if (tracker != nullptr && !source_.finished()) {
    status_->OnJobState(tracker->state());
    if (const auto& cause = tracker->root_cause()) status_->OnRootCause(DescribeRootCause(*cause));
  }
  status_->SetStoreBytesSent(static_cast<int64_t>(source_.store_bytes_sent()));
  board_->Publish(status_->View(loop_.UnixMillis()));
}

}  // namespace dslaunch::launcher
