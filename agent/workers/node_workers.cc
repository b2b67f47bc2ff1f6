#include "agent/workers/node_workers.h"

#include "common/check.h"

namespace dslaunch::agent {

bool IsLegalTransition(WorkerState from, WorkerState to) {
  return (from == WorkerState::kRunning && to == WorkerState::kExited) ||
         (from == WorkerState::kExited && to == WorkerState::kReported);
}

void NodeWorkers::Transition(Worker& w, WorkerState to) {
  DSLAUNCH_CHECK(IsLegalTransition(w.state, to))
      << "rank " << w.rank << ": illegal worker transition " << static_cast<int>(w.state)
      << " -> " << static_cast<int>(to);
  w.state = to;
}

size_t NodeWorkers::Add(int rank, pid_t pid) {
  workers_.push_back(Worker{rank, pid, WorkerState::kRunning, std::nullopt, false});
  return workers_.size() - 1;
}

std::optional<size_t> NodeWorkers::OnReaped(pid_t pid, ExitStatus status) {
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker& w = workers_[i];
    if (w.pid != pid || w.state != WorkerState::kRunning) continue;
    w.status = status;
    w.stopped = stopping_;
    Transition(w, WorkerState::kExited);
    return i;
  }
  return std::nullopt;
}

void NodeWorkers::MarkReported(size_t index) { Transition(workers_[index], WorkerState::kReported); }

bool NodeWorkers::AllReported() const {
  for (const auto& w : workers_) {
    if (w.state != WorkerState::kReported) return false;
  }
  return true;
}

bool NodeWorkers::AllSucceeded() const {
  for (const auto& w : workers_) {
    if (w.state != WorkerState::kReported || w.stopped || !w.status || !w.status->success()) {
      return false;
    }
  }
  return true;
}

std::vector<pid_t> NodeWorkers::AllGroups() const {
  std::vector<pid_t> out;
  for (const auto& w : workers_) out.push_back(w.pid);
  return out;
}

std::vector<pid_t> NodeWorkers::RunningGroups() const {
  std::vector<pid_t> out;
  for (const auto& w : workers_) {
    if (w.state == WorkerState::kRunning) out.push_back(w.pid);
  }
  return out;
}

}  // namespace dslaunch::agent
