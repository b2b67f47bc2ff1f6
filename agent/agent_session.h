// AgentSession: one agent's session with the launcher, from its assignment to its exit
// (docs/protocol.md, "Agent control messages"). The story of a node:
//
//   Start   fence what an earlier agent of this place left running, make the private directory
//           (the workers' secret, the store proxy's socket), open every log file, then start the
//           generation's workers (WORKER_STARTED);
//   Run     forward their output, progress and stalls, report each exit (WORKER_EXITED) and,
//           when all are reported, AGENT_DONE; then exit, or (restartable, node mode) wait for
//           the next generation's ASSIGNMENT or the RELEASE;
//   stop    on STOP, a signal or a lost launcher: SIGTERM to the workers, SIGKILL after the grace
//           period (AGENT_STOPPING first when the reason is the agent's own);
//   end     ReleaseNode: no process of the workers outlives the agent, the private directory goes.
//
// The session makes the decisions and owns the workers' processes and the event loop. Its parts:
// the control link (agent/control/control_link.h: framing, heartbeats) and the worker pipes
// (agent/workers/worker_pipes.h: output to the logs and the launcher), which call back through the
// listener interfaces their headers declare, never the session itself; the progress poller
// (agent/progress/progress_poller.h: progress files, watchdog) and the private directory
// (agent/node/agent_dir.h: secret, fence record), which answer calls. Threading: one thread;
// Start, ReleaseNode and ReportFailure are called before Run or after it returns.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/agent_config.h"
#include "agent/control/control_link.h"
#include "agent/exit_codes.h"
#include "agent/node/agent_dir.h"
#include "agent/node/core_binding.h"
#include "agent/progress/progress_poller.h"
#include "agent/replica/snapshot_replication.h"
#include "agent/workers/log_files.h"
#include "agent/workers/node_workers.h"
#include "agent/workers/snapshot_memory.h"
#include "agent/workers/worker_pipes.h"
#include "common/control_messages.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace dslaunch::agent {

class StoreProxy;

// Size: about 350 lines of code in agent_session.cc, past the house's ~300, for a reason: what
// is left is the node's story and its stop sequence, which share the phase, the workers'
// bookkeeping and the loop's timers and signals; every part with state and I/O of its own (the
// link, the pipes, the poller, the directory) is out, and what remains reads top to bottom.
class AgentSession final : private ControlLinkListener, private WorkerPipesListener {
 public:
  // `config` outlives the session; `control_fd` is the registered connection to the launcher and
  // `received` what the registration read on it past the ASSIGNMENT; `replication` copies the
  // node's in-memory snapshots to peer nodes (null: this agent could not listen for copies, and
  // makes none).
  AgentSession(const AgentConfig& config, control::Assignment assignment, UniqueFd control_fd, std::string received,
               std::unique_ptr<replica::SnapshotReplication> replication);
  ~AgentSession() override;  // ReleaseNode
  AgentSession(const AgentSession&) = delete;
  AgentSession& operator=(const AgentSession&) = delete;

  // Everything before the event loop, then the first generation's workers. On failure the caller
  // calls ReleaseNode, then ReportFailure.
  Status Start();
  // Runs the event loop until the session ends; returns the agent's exit code (agent/exit_codes.h).
  int Run();
  // Final sweep, idempotent: no process of this node's workers outlives the agent, and the
  // private directory goes (see agent_session.cc for why it runs before AGENT_FAILED too).
  void ReleaseNode();
  // Tells the launcher why this node cannot run its assignment (AGENT_FAILED), blocking; for a
  // failed Start, with the event loop not running.
  void ReportFailure(const Status& why);

 private:
  // kRunning: the workers of assignment_'s generation run or are being reported. kIdle: all of
  // them were reported (AGENT_DONE sent) and the assignment is restartable: the agent waits for
  // the next generation's ASSIGNMENT or RELEASE. kExiting: the event loop stops once the control
  // link has written what it holds.
  enum class Phase { kRunning, kIdle, kExiting };
  // A worker's files, created before any worker starts: its logs, its error record's path
  // (TORCHELASTIC_ERROR_FILE) and its progress file (DSLAUNCH_PROGRESS_FILE).
  struct WorkerFiles {
    JobLogDir::WorkerLogs logs;
    std::string progress_file;
  };
  struct Loop;  // the io_context, the signals, the SIGKILL and progress timers (agent_session.cc)

  // The generation's start.
  Status FenceNode();
  void StartStoreProxy();
  Result<std::vector<WorkerFiles>> CreateWorkerFiles();
  Status StartWorkers(std::vector<WorkerFiles> files);
  Status StartWorker(const control::WorkerAssignment& spec, WorkerFiles files, const RankCores& cores);
  std::string MasterInterface() const;
  // On the node that runs rank 0: one warning line when MASTER_ADDR is not one of its addresses.
  void WarnIfMasterAddrElsewhere() const;
  void StartNextGeneration(control::Assignment next);
  // The workers' ends and the session's.
  void Reap();
  void MaybeReport(size_t index);
  void Finish();
  void Exit();
  // Stopping.
  void WaitForSignal();
  void OnStopSignal(int sig);
  void StopOnOwn(std::string reason, std::chrono::milliseconds grace, int signal = 0);
  void StopOnLostLauncher(std::string reason);
  void BeginStop(std::chrono::milliseconds grace);
  void ArmKill(std::chrono::steady_clock::time_point kill_at);
  // Progress and stalls.
  void PollProgress();
  void Apply(const ProgressPoll& poll);
  void OnStall(const Stall& stall);
  void ReportStoppedWorkers();
  // The store proxy's generation ends before AGENT_DONE or AGENT_FAILED and when the launcher is lost.
  void EndProxyGeneration();
  void Send(const control::Message& m);
  std::string Prefix() const;

  // ControlLinkListener.
  void OnMessage(control::Message message) override;
  void OnProxiedReply(std::string_view payload) override;
  void OnLost(const LinkLoss& loss) override;
  void OnWriteFailed() override;
  void OnFinished() override;
  void OnWarning(std::string_view line) override;
  // WorkerPipesListener.
  void OnOutput(control::Message message) override;
  void OnPipesClosed(size_t index) override;

  // What the session runs.
  const AgentConfig& config_;
  control::Assignment assignment_;  // the current generation's
  Phase phase_ = Phase::kRunning;

  // The event loop and the connection: loop_ is declared first, so it outlives every part that
  // holds its io_context.
  std::unique_ptr<Loop> loop_;
  ControlLink link_;

  // The node.
  AgentDir dir_;
  std::unique_ptr<StoreProxy> store_proxy_;  // null: the workers reach the launcher directly
  std::unique_ptr<JobLogDir> logs_;
  std::string job_dir_;           // the job's log directory on this node (DSLAUNCH_JOB_DIR)
  std::string master_interface_;  // MasterInterface() of the current generation

  // The current generation's workers, by NodeWorkers' index.
  NodeWorkers workers_;
  std::unique_ptr<WorkerPipes> pipes_;
  std::vector<std::string> error_files_;  // TORCHELASTIC_ERROR_FILE of each
  ProgressPoller progress_;               // across generations: each start watches its rank afresh
  SnapshotMemory snapshots_;              // across generations: a worker's snapshots outlive it
  std::unique_ptr<replica::SnapshotReplication> replication_;  // across generations too

  // Stopping and the end.
  std::chrono::steady_clock::time_point kill_at_;  // when the SIGKILL timer fires, once stopping
  bool leaving_ = false;  // the agent exits after this generation (a signal, RELEASE, lost launcher)
  bool lost_launcher_ = false;
  int exit_code_ = kAgentOk;
  std::optional<int> released_code_;  // the job's exit code, from RELEASE
  int stop_signal_ = 0;               // the signal that stopped the agent, if one did
};

}  // namespace dslaunch::agent
