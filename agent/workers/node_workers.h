// NodeWorkers: the agent's bookkeeping for the workers of its node, without any I/O.
//
// Each worker goes kRunning -> kExited (reaped, output may still be draining) -> kReported
// (WorkerExited sent). The agent is done when every worker is kReported. Stopping is a flag of the
// node: workers that end after it are marked `stopped` in their report. Pure; not thread-safe.
#pragma once

#include <sys/types.h>

#include <optional>
#include <vector>

#include "common/exit_status.h"

namespace dslaunch::agent {

enum class WorkerState { kRunning, kExited, kReported };

// One row of the transition table: kRunning->kExited, kExited->kReported. Anything else is a bug.
bool IsLegalTransition(WorkerState from, WorkerState to);

class NodeWorkers {
 public:
  // Adds a started worker; returns its index.
  size_t Add(int rank, pid_t pid);

  // Records a reaped child. Returns the worker's index, or nullopt for a pid that is not ours.
  std::optional<size_t> OnReaped(pid_t pid, ExitStatus status);
  void MarkReported(size_t index);

  void BeginStop() { stopping_ = true; }
  bool stopping() const { return stopping_; }

  WorkerState state(size_t index) const { return workers_[index].state; }
  int rank(size_t index) const { return workers_[index].rank; }
  pid_t pid(size_t index) const { return workers_[index].pid; }
  const std::optional<ExitStatus>& status(size_t index) const { return workers_[index].status; }
  // True when the worker ended after the node began stopping.
  bool stopped(size_t index) const { return workers_[index].stopped; }
  size_t size() const { return workers_.size(); }

  bool AllReported() const;
  // True when every worker has been reported and each exited 0 without being stopped.
  bool AllSucceeded() const;
  // Pids (= process group ids) of every worker, for the final sweep of stragglers.
  std::vector<pid_t> AllGroups() const;
  // Pids of workers that are still running.
  std::vector<pid_t> RunningGroups() const;

 private:
  struct Worker {
    int rank = 0;
    pid_t pid = -1;
    WorkerState state = WorkerState::kRunning;
    std::optional<ExitStatus> status;
    bool stopped = false;
  };
  void Transition(Worker& w, WorkerState to);

  std::vector<Worker> workers_;
  bool stopping_ = false;
};

}  // namespace dslaunch::agent
