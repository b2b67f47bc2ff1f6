// JobTracker: the launcher's view of one job generation, as a pure state machine.
//
// The I/O shell (job_runner.cc) feeds it events (agent registered, worker started/exited, agent
// done or lost, signal, deadline) and carries out the Action it returns. The job is the failure
// domain: the first failure anywhere becomes the root cause and every node is told to stop.
//
//   kStarting --(all agents registered)--> kRunning --(all agents done)--> kFinished
//       |                                      |
//       +--------(root cause)-------> kStopping --(all agents done or deadline)--> kFinished
//
// Not thread-safe; time is not needed (deadlines are events).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/control_messages.h"
#include "common/error_record.h"
#include "common/exit_status.h"
#include "launcher/plan/launch_plan.h"

namespace dslaunch::launcher {

enum class JobState { kStarting, kRunning, kStopping, kFinished };

bool IsLegalTransition(JobState from, JobState to);
std::string_view JobStateName(JobState state);

// Why the job stopped early. Only the first one is kept.
struct RootCause {
  enum class Kind {
    kWorkerFailed,
    kWorkerStalled,  // the agent's watchdog: no progress report for the rank's timeout
    kAgentLost,
    kAgentStopped,
    kAgentFailed,
    kSignal,
    kStartupFailed,
    kRescale,  // not a failure: the launcher stops the generation to start a bigger one
  };
  Kind kind = Kind::kWorkerFailed;
  int node_rank = -1;
  std::string host;
  int rank = -1;  // kWorkerFailed
  int64_t pid = 0;
  // worker's (kWorkerFailed), agent's (kAgentLost, if known), the signal the launcher
  // (kSignal) or the agent (kAgentStopped, if any) received
  ExitStatus status;
  std::vector<std::string> stderr_tail;
  std::string log_path;
  std::string message;  // what happened, for kinds other than kWorkerFailed (kAgentStopped: the agent's
  // reason; kAgentFailed: the agent's words)
  // kWorkerFailed with an error record (common/error_record.h): what the worker said, when, and
  // whether it failed only because a peer did.
  std::optional<ErrorRecord> error;
  // kWorkerFailed: its last reported step; kWorkerStalled: that and how long it was silent, and
  // the watchdog timeout (ms).
  int64_t last_step = -1;
  int64_t silence_ms = 0;
  int64_t timeout_ms = 0;
  std::string process_state;  // kWorkerStalled: as the agent found it ("stopped", "sleeping", ...)
};

// What the shell must do after an event.
enum class Action {
  kNone,
  kStopAll,  // send Stop to every agent and arm the stop deadline
  kKillAll,  // the job is already stopping: tell every agent to SIGKILL its workers now
  kFinish,   // print the summary and exit with ExitCode()
};

class JobTracker {
 public:
  explicit JobTracker(const LaunchPlan& plan);

  Action OnAgentRegistered(int node_rank);
  // A failed worker becomes the root cause if it is the first failure. While the job is stopping,
  // a later one replaces a root cause whose error record says it was caused by a peer, when its
  // own record says it was not, and happened no later (docs/launcher.md, "Which failure is the
  // root cause").
  Action OnWorkerExited(int node_rank, const control::WorkerExited& exited);
  Action OnAgentDone(int node_rank);
  // The agent's connection broke before AgentDone, or it never connected. `status` is the agent
  // process's exit, when the launcher started it and saw it end.
  Action OnAgentLost(int node_rank, std::string reason, std::optional<ExitStatus> status);
  // The agent is stopping its workers for a reason of its own (AGENT_STOPPING): that reason, not
  // the exits that follow, is the root cause.
  Action OnAgentStopping(int node_rank, const control::AgentStopping& stopping);
  // The agent reported that it cannot run its assignment (AGENT_FAILED): `reason` is its own
  // account (e.g. "cannot create log directory ..."), the root cause if nothing failed before.
  Action OnAgentFailed(int node_rank, std::string reason);
  // SIGINT, SIGTERM, SIGHUP or SIGUSR1 (a stop for a requeue) to the launcher: the root cause if
  // nothing failed before, and the job stops (kStopAll). A SIGINT while the job is already stopping (a second Ctrl-C) is kKillAll:
  // the grace period is cut short (the usual meaning of a second Ctrl-C). Other signals while
  // stopping: kNone.
  Action OnSignal(int signal);
  Action OnStartupFailed(std::string message);
  // The agent's watchdog found a rank silent for its timeout (WORKER_STALLED): a failure of that
  // rank, the root cause if nothing failed before. Stalls reported while the job is stopping are
  // kept too (stalled_ranks()): a hang leaves every peer silent, and the summary names them all.
  // A stalled rank found stopped or in disk sleep replaces a root cause that is a stalled rank
  // found otherwise (sleeping: most likely waiting for it in a collective), or a peer's
  // collateral failure (docs/elastic.md, "Which rank hung").
  Action OnWorkerStalled(int node_rank, const control::WorkerStalled& stalled);
  // The launcher stops this generation to start a bigger one (scale-up): the root cause unless
  // something failed before; the workers' SIGTERM exits that follow are not failures.
  Action OnRescale(std::string message);
  // The agents did not all report within the stop deadline.
  Action OnStopDeadline();

  JobState state() const { return state_; }
  const std::optional<RootCause>& root_cause() const { return root_cause_; }
  // 0 if every worker exited 0; otherwise the class of the root cause (common/exit_codes.h,
  // docs/exit-codes.md): the failed rank's code, 128+N for the launcher's signal N, kExitRequeue
  // for SIGUSR1, kExitInfrastructure for a lost, stopped or failed agent and a failed start-up.
  int ExitCode() const;
  bool agent_done(int node_rank) const { return nodes_[node_rank].done; }
  bool agent_registered(int node_rank) const { return nodes_[node_rank].registered; }
  // Node ranks whose agent was lost or failed in this generation, in the order it happened.
  const std::vector<int>& lost_nodes() const { return lost_; }
  // Node ranks that had not reported done when the stop deadline passed.
  std::vector<int> unfinished_nodes() const;
  // Every WORKER_STALLED of this generation, in arrival order.
  const std::vector<RootCause>& stalled_ranks() const { return stalled_; }

 private:
  struct Node {
    std::string host;
    bool registered = false;
    bool done = false;
  };
  // A root cause of `kind` on the node with this rank (its host filled in).
  RootCause CauseAt(RootCause::Kind kind, int node_rank) const;
  Action Fail(RootCause cause);
  // The node will say nothing more (its agent is lost, or reported that it cannot run): it counts
  // as done, and `cause` is the root cause unless the node had reported done or the job is
  // stopping already.
  Action OnNodeGone(int node_rank, RootCause cause);
  Action FinishIfAllDone();
  void Transition(JobState to);
  void MarkDone(Node& node);

  std::vector<Node> nodes_;
  // How many of nodes_ are registered and done: counted, not scanned for, since every agent's
  // REGISTER and AGENT_DONE asks whether all are (a scan was quadratic in the nodes).
  size_t registered_count_ = 0;
  size_t done_count_ = 0;
  JobState state_ = JobState::kStarting;
  std::optional<RootCause> root_cause_;
  std::vector<int> lost_;
  std::vector<RootCause> stalled_;
};

}  // namespace dslaunch::launcher
