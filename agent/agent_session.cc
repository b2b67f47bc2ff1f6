// The agent's session (agent/agent_session.h): the decisions, the workers' processes, and the
// event loop's own sources (SIGCHLD and the stop signals, the SIGKILL timer, the progress poll),
// all on one Asio io_context thread. The parts do their own I/O: the control link, the pipes.
#include "agent/agent_session.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <iostream>

#include "agent/node/cpu_topology.h"
#include "agent/node/node_fence.h"
#include "agent/node/secret_dir.h"
#include "agent/store_proxy/store_proxy.h"
#include "agent/workers/master_addr_check.h"
#include "agent/workers/own_stop.h"
#include "agent/workers/worker_env_on_node.h"
#include "agent/workers/worker_process.h"
#include "common/asio.h"
#include "common/env_names.h"
#include "common/message_types.h"
#include "common/process_tree.h"
#include "common/route.h"
#include "common/text.h"

namespace dslaunch::agent {
namespace {

using Clock = std::chrono::steady_clock;

ControlLinkOptions LinkOptions(const control::Assignment& a, std::string received) {
  ControlLinkOptions o;
  o.received = std::move(received);
  // The launcher sends the job's heartbeat settings in every generation's ASSIGNMENT: the first
  // one's hold for the session.
  o.heartbeat_interval = std::chrono::milliseconds(a.heartbeat_interval_ms);
  o.heartbeat_timeout = std::chrono::milliseconds(a.heartbeat_timeout_ms);
  o.generation = a.generation;
  return o;
}

std::string StateOf(pid_t pid) {
  auto state = ProcessState(pid);
  return state ? ProcessStateName(*state) : std::string();
}

}  // namespace

struct AgentSession::Loop {
  asio::io_context io;
  asio::signal_set signals{io, SIGCHLD, SIGTERM, SIGINT};
  asio::steady_timer kill_timer{io};
  asio::steady_timer progress_timer{io};

  Loop() { signals.add(SIGHUP); }
};

AgentSession::AgentSession(const AgentConfig& config, control::Assignment assignment, UniqueFd control_fd,
                           std::string received, std::unique_ptr<replica::SnapshotReplication> replication)
    : config_(config),
      assignment_(std::move(assignment)),
      loop_(std::make_unique<Loop>()),
      link_(loop_->io, std::move(control_fd), *this, LinkOptions(assignment_, std::move(received))),
      pipes_(std::make_unique<WorkerPipes>(loop_->io, static_cast<WorkerPipesListener&>(*this))),
      replication_(std::move(replication)) {}

AgentSession::~AgentSession() { ReleaseNode(); }

// ---- The story ----

Status AgentSession::Start() {
  // Orphaned descendants of the workers are re-parented to the agent, so they can be found
  // and stopped with the job (common/process_tree.h).
  DSLAUNCH_RETURN_IF_ERROR(BecomeChildSubreaper());
  // Before anything else (the sweep of stale directories in AgentDir::Create would remove a
  // killed agent's record): no worker of the agent that held this place before may run beside ours.
  DSLAUNCH_RETURN_IF_ERROR(FenceNode());
  DSLAUNCH_RETURN_IF_ERROR(dir_.Create(config_.runtime_dir, config_.job_id, config_.node_rank, config_.secret));
  StartStoreProxy();
  DSLAUNCH_ASSIGN_OR_RETURN(
      JobLogDir logs,
      JobLogDir::Open({assignment_.log_dir, config_.runtime_dir, config_.job_id, ::getuid()}));
  logs_ = std::make_unique<JobLogDir>(std::move(logs));
  job_dir_ = std::filesystem::absolute(logs_->path()).string();
  DSLAUNCH_ASSIGN_OR_RETURN(std::vector<WorkerFiles> files, CreateWorkerFiles());
  WaitForSignal();
  link_.Start();
  return StartWorkers(std::move(files));
}

int AgentSession::Run() {
  loop_->io.run();
  return config_.slots > 0 ? NodeModeExitCode(released_code_, stop_signal_) : exit_code_;
}

// Runs before AGENT_FAILED is sent, not only at the end: once the launcher hears of the failure it
// may end the job and kill this agent at once, and a killed agent would leave the directory, with
// the job's secret in it, until another agent of the user sweeps it (agent/node/secret_dir.h).
// The workers' process groups go, then every descendant that left them (the agent is a child
// subreaper, so an orphan that called setsid() is still in its tree).
void AgentSession::ReleaseNode() {
  for (pid_t pgid : workers_.AllGroups()) SignalProcessGroup(pgid, SIGKILL).IgnoreError();
  auto swept = KillAllDescendants();
  if (!swept.ok()) {
    std::cerr << Prefix() << "final sweep: " << swept.status().ToString() << "\n";
  } else if (*swept > 0) {
    std::cerr << Prefix() << "killed " << *swept << " leftover process" << (*swept == 1 ? "" : "es")
              << " of the job's workers\n";
  }
  dir_.Remove();
}

void AgentSession::ReportFailure(const Status& why) {
  EndProxyGeneration();
  link_.WriteNow(control::AgentFailed{assignment_.generation, why.message()});
}

// The node was lost and is re-admitted (ASSIGNMENT's fence_agent_pid): the earlier agent and
// the workers it recorded are killed and gone before this agent starts any (docs/elastic.md,
// "Fencing a lost node").
Status AgentSession::FenceNode() {
  if (assignment_.fence_agent_pid <= 0) return Status::Ok();
  const auto pid = static_cast<pid_t>(assignment_.fence_agent_pid);
  auto fenced = FenceEarlierAgent(config_.runtime_dir, config_.job_id, pid, OwnPidNamespace());
  if (!fenced.ok()) return fenced.status();
  std::cerr << Prefix() << "fenced the node: " << DescribeFence(*fenced, pid) << "\n";
  return Status::Ok();
}

// Serves the workers' store traffic on a socket in the private directory, when the launcher asks
// for it, carried on the control connection (docs/protocol.md, "Store proxy"). A socket that
// cannot be made (a path too long for a Unix socket, a file system without sockets) leaves this
// node's workers on the direct path, with one line saying so: the job still runs, as it did
// before the proxy.
void AgentSession::StartStoreProxy() {
  if (!assignment_.store_proxy) return;
  StoreProxyOptions o{dir_.path() + "/" + kStoreProxySocketName, config_.job_id, config_.secret,
                      [this](std::string payload) { link_.SendFrame(msg::kStoreProxied, std::move(payload)); },
                      [prefix = Prefix()](std::string_view line) { std::cerr << prefix << line << "\n"; }};
  auto proxy = StoreProxy::Listen(loop_->io, std::move(o));
  if (!proxy.ok()) {
    std::cerr << Prefix() << "store proxy off on this node, its workers reach the launcher directly: "
              << proxy.status().message() << "\n";
    return;
  }
  store_proxy_ = std::move(*proxy);
  store_proxy_->BeginGeneration(assignment_.generation);
}

// Every log file of the generation before any worker: a log directory or file that cannot be
// used stops the node with nothing started. Names per generation (log_files.h), so that a later
// generation never reuses a file.
Result<std::vector<AgentSession::WorkerFiles>> AgentSession::CreateWorkerFiles() {
  std::vector<WorkerFiles> files;
  const int generation = assignment_.generation;
  for (const auto& spec : assignment_.workers) {
    WorkerFiles f;
    DSLAUNCH_ASSIGN_OR_RETURN(f.logs, logs_->CreateWorkerLogs(spec.rank, generation));
    DSLAUNCH_ASSIGN_OR_RETURN(f.progress_file, CreateProgressFile(*logs_, spec.rank, generation));
    files.push_back(std::move(f));
  }
  return files;
}

Status AgentSession::StartWorkers(std::vector<WorkerFiles> files) {
  master_interface_ = MasterInterface();
  WarnIfMasterAddrElsewhere();
  // --bind_cores_to_rank: every rank's cores, split before any worker starts.
  DSLAUNCH_ASSIGN_OR_RETURN(std::vector<RankCores> cores, AssignedCores(assignment_));
  for (size_t i = 0; i < assignment_.workers.size(); ++i) {
    const auto& spec = assignment_.workers[i];
    Status started = StartWorker(spec, std::move(files[i]), cores.empty() ? RankCores{} : cores[i]);
    DSLAUNCH_RETURN_IF_ERROR(started.WithContext("rank " + std::to_string(spec.rank)));
  }
  if (assignment_.workers.empty()) Finish();
  PollProgress();
  return Status::Ok();
}

Status AgentSession::StartWorker(const control::WorkerAssignment& spec, WorkerFiles files, const RankCores& cores) {
  JobLogDir::WorkerLogs& logs = files.logs;
  std::map<std::string, std::string> env = spec.env;
  env[env::kErrorFile] = logs.error_file;
  env[env::kProgressFile] = files.progress_file;
  std::vector<int> snapshot_fds;  // the memory its in-memory snapshots outlive it in, when it asks
  std::vector<UniqueFd> copies;   // local rank 0's: the peers' snapshots this node holds
  const auto own = env.find(env::kSnapshotMemory);
  const auto node_wide = assignment_.env.find(env::kSnapshotMemory);
  const bool asks = own != env.end() ? own->second == "1"
                                     : node_wide != assignment_.env.end() && node_wide->second == "1";
  if (asks) {
    DSLAUNCH_ASSIGN_OR_RETURN(snapshot_fds, snapshots_.For(spec.local_rank));
    env[env::kSnapshotFds] = SnapshotFdsValue(snapshot_fds);
    if (replication_) {
      DSLAUNCH_RETURN_IF_ERROR(replication_->sender().Watch(spec.local_rank, snapshot_fds));
      if (spec.local_rank == 0) {
        DSLAUNCH_ASSIGN_OR_RETURN(copies, replication_->store().Descriptors());
        std::vector<int> copy_fds;
        for (const UniqueFd& fd : copies) copy_fds.push_back(fd.get());
        env[env::kSnapshotReplicaFds] = SnapshotFdsValue(copy_fds);
        snapshot_fds.insert(snapshot_fds.end(), copy_fds.begin(), copy_fds.end());
      }
    }
  }
  // Watched from before the start: a report written at once is not taken for the baseline.
  progress_.Watch(spec.rank, files.progress_file, std::chrono::milliseconds(assignment_.watchdog_timeout_ms),
                  Clock::now());
  NodeFacts node{config_.cores, static_cast<int>(assignment_.workers.size()), dir_.secret_file(),
                 store_proxy_ ? store_proxy_->address() : config_.endpoint, job_dir_, master_interface_,
                 static_cast<int>(cores.cpus.size()), config_.endpoint};
  ProcessLaunch launch{spec.argv, CompleteWorkerEnvironment(config_.environment, assignment_.env, env, node),
                       assignment_.working_dir, cores.cpus, cores.numa_node, std::move(snapshot_fds)};
  DSLAUNCH_ASSIGN_OR_RETURN(SpawnedProcess p, SpawnInOwnProcessGroup(launch));
  workers_.Add(spec.rank, p.pid);
  Status recorded = dir_.RecordWorker(assignment_.generation, spec.rank, p.pid);
  error_files_.push_back(std::move(logs.error_file));
  WorkerOutput output(assignment_.generation, spec.rank, assignment_.tee,
                      LogWriter(std::move(logs.out), std::move(logs.out_path)),
                      LogWriter(std::move(logs.err), std::move(logs.err_path)));
  Send(control::WorkerStarted{assignment_.generation, spec.rank, p.pid, output.stderr_log_path()});
  pipes_->Add(std::move(p.stdout_fd), std::move(p.stderr_fd), std::move(output));
  if (workers_.stopping()) SignalProcessGroup(p.pid, SIGTERM).IgnoreError();
  return recorded;  // a worker the next agent could not fence stops the node (it is running: reported as usual)
}

// The interface of this node's route to the generation's MASTER_ADDR (NCCL_SOCKET_IFNAME's
// default), or "" with one line saying why when it cannot be found.
std::string AgentSession::MasterInterface() const {
  auto addr = assignment_.env.find(env::kMasterAddr);
  auto port = assignment_.env.find(env::kMasterPort);
  if (addr == assignment_.env.end() || port == assignment_.env.end()) return "";
  auto name = InterfaceToward(addr->second, port->second);
  if (!name.ok()) {
    std::cerr << Prefix() << "NCCL_SOCKET_IFNAME left unset: " << name.status().message() << "\n";
    return "";
  }
  return *name;
}

// On the node that runs rank 0, before its workers start: a MASTER_ADDR that is not this node's
// is said in one line (agent/workers/master_addr_check.h says why it is not refused).
void AgentSession::WarnIfMasterAddrElsewhere() const {
  auto addr = assignment_.env.find(env::kMasterAddr);
  if (addr == assignment_.env.end()) return;
  const bool runs_rank_zero = std::any_of(assignment_.workers.begin(), assignment_.workers.end(),
                                          [](const control::WorkerAssignment& w) { return w.rank == 0; });
  if (!runs_rank_zero) return;
  const std::string warning =
      MasterAddrWarning(addr->second, ResolveAndProbe(addr->second), config_.host, MachineAddresses());
  if (!warning.empty()) std::cerr << Prefix() << warning << "\n";
}

// The next generation's assignment, received while idle.
void AgentSession::StartNextGeneration(control::Assignment next) {
  // The finished generation's workers have all been reported: their pipes are closed and any
  // handler of theirs still queued (an aborted read) runs before their destruction.
  WorkerPipes::Retire(std::move(pipes_));
  pipes_ = std::make_unique<WorkerPipes>(loop_->io, static_cast<WorkerPipesListener&>(*this));
  workers_ = NodeWorkers();
  error_files_.clear();
  assignment_ = std::move(next);
  link_.set_generation(assignment_.generation);
  phase_ = Phase::kRunning;
  // The previous generation's workers lost the proxy before AGENT_DONE; this one's are served
  // from now on (docs/protocol.md, "Store proxy").
  if (store_proxy_) store_proxy_->BeginGeneration(assignment_.generation);
  auto files = CreateWorkerFiles();
  Status started = files.ok() ? StartWorkers(std::move(*files)) : files.status();
  if (!started.ok()) {
    std::cerr << Prefix() << "cannot start the workers of generation " << assignment_.generation << ": "
              << started.ToString() << "\n";
    EndProxyGeneration();
    ReleaseNode();
    Send(control::AgentFailed{assignment_.generation, started.message()});
    exit_code_ = kAgentStartupFailed;
    Exit();
  }
}

// ---- The workers' ends and the session's ----

void AgentSession::Reap() {
  while (true) {
    int st = 0;
    pid_t pid = ::waitpid(-1, &st, WNOHANG);
    if (pid <= 0) return;
    auto index = workers_.OnReaped(pid, ExitStatus::FromWaitStatus(st));
    if (!index) continue;
    // A report written just before the exit still gives the rank's last step.
    Apply(progress_.OnExited(assignment_.generation, workers_.rank(*index), Clock::now()));
    pipes_->OnExited(*index);
    MaybeReport(*index);
  }
}

// A worker is reported once it was reaped and its pipes are closed.
void AgentSession::MaybeReport(size_t index) {
  if (workers_.state(index) != WorkerState::kExited || !pipes_->closed(index)) return;
  const WorkerOutput& output = pipes_->output(index);
  control::WorkerExited m;
  m.generation = assignment_.generation;
  m.rank = workers_.rank(index);
  m.pid = workers_.pid(index);
  m.status = *workers_.status(index);
  m.stopped = workers_.stopped(index);
  m.stderr_tail = output.stderr_tail();
  m.log_path = output.stderr_log_path();
  m.error_record = ReadErrorRecord(error_files_[index]);
  m.last_step = progress_.last_step(m.rank);
  Send(m);
  workers_.MarkReported(index);
  if (workers_.AllReported()) Finish();
}

// Every worker of the generation has been reported.
void AgentSession::Finish() {
  if (phase_ != Phase::kRunning) return;
  loop_->kill_timer.cancel();
  loop_->progress_timer.cancel();
  if (lost_launcher_) {
    exit_code_ = kAgentLostLauncher;
  } else {
    exit_code_ = workers_.AllSucceeded() ? kAgentOk : kAgentWorkersFailed;
  }
  EndProxyGeneration();
  Send(control::AgentDone{assignment_.generation});
  if ((assignment_.restartable || assignment_.await_release) && !lost_launcher_ && !leaving_) {
    phase_ = Phase::kIdle;  // heartbeats go on; the launcher decides what comes next
    return;
  }
  Exit();
}

void AgentSession::Exit() {
  if (phase_ == Phase::kExiting) return;
  phase_ = Phase::kExiting;
  loop_->kill_timer.cancel();
  // Without a launcher to hear it, the flush may never complete (a cut network): do not wait.
  link_.Finish(/*flush=*/!lost_launcher_);
}

// ---- Stopping ----

void AgentSession::WaitForSignal() {
  loop_->signals.async_wait([this](boost::system::error_code ec, int sig) {
    if (ec) return;
    if (sig == SIGCHLD) {
      Reap();
    } else {
      OnStopSignal(sig);
    }
    WaitForSignal();
  });
}

void AgentSession::OnStopSignal(int sig) {
  if (phase_ == Phase::kIdle) {
    std::cerr << Prefix() << "received " << SignalName(sig) << " between generations, exiting\n";
    if (stop_signal_ == 0) stop_signal_ = sig;
    Exit();
  } else if (phase_ == Phase::kRunning) {
    // A second SIGINT (Ctrl-C again) kills at once, as the launcher does.
    if (sig == SIGINT && workers_.stopping()) {
      std::cerr << Prefix() << "received SIGINT again, killing workers now\n";
      BeginStop(std::chrono::milliseconds(0));
    } else {
      StopOnOwn("the agent received " + SignalName(sig), OwnStopGrace(OwnStopCause::kSignal, assignment_), sig);
    }
  }
}

// Stops the workers for a reason of the agent's own, telling the launcher first (AGENT_STOPPING)
// so that the reason, not the workers' SIGTERM exits, becomes the job's root cause.
void AgentSession::StopOnOwn(std::string reason, std::chrono::milliseconds grace, int signal) {
  // The agent will not take part in another generation: it exits once its workers are reported.
  leaving_ = true;
  if (stop_signal_ == 0) stop_signal_ = signal;
  if (workers_.stopping()) {
    BeginStop(grace);  // a shorter grace brings the SIGKILL forward
    return;
  }
  std::cerr << Prefix() << reason << ", stopping workers\n";
  Send(control::AgentStopping{assignment_.generation, std::move(reason), signal});
  BeginStop(grace);
}

// Lost the launcher (connection closed, heartbeats expired, unreadable stream): a failure,
// stopped as the launcher stops its side of it (kFailureStopGrace when the job may restart),
// so that this node's workers are gone before the launcher could re-admit the node
// (docs/elastic.md, "Fencing a lost node").
void AgentSession::StopOnLostLauncher(std::string reason) {
  lost_launcher_ = true;
  StopOnOwn(std::move(reason), OwnStopGrace(OwnStopCause::kLostLauncher, assignment_));
}

void AgentSession::BeginStop(std::chrono::milliseconds grace) {
  const Clock::time_point kill_at = Clock::now() + grace;
  if (workers_.stopping()) {
    // A later stop with a shorter grace period (the launcher interrupted again, or a second
    // SIGINT here) brings the SIGKILL forward; nothing postpones it.
    if (phase_ == Phase::kRunning && kill_at < kill_at_) ArmKill(kill_at);
    return;
  }
  workers_.BeginStop();
  loop_->progress_timer.cancel();  // the job is ending: no rank is stalled any more
  for (pid_t pgid : workers_.RunningGroups()) SignalProcessGroup(pgid, SIGTERM).IgnoreError();
  // Processes that left the workers' groups are part of the job too: they get the same SIGTERM
  // (once: members of a worker's group were signalled through it).
  SignalDescendants(SIGTERM, workers_.AllGroups()).status().IgnoreError();
  ArmKill(kill_at);
  if (workers_.size() == 0 || workers_.AllReported()) Finish();
}

void AgentSession::ArmKill(Clock::time_point kill_at) {
  kill_at_ = kill_at;
  loop_->kill_timer.expires_at(kill_at);
  loop_->kill_timer.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    for (pid_t pgid : workers_.AllGroups()) {
      if (ProcessGroupExists(pgid)) SignalProcessGroup(pgid, SIGKILL).IgnoreError();
    }
    SignalDescendants(SIGKILL).status().IgnoreError();
  });
}

// ---- Progress and stalls ----

// Polls the workers' progress files every interval and kills the ranks that have been silent for
// longer than their watchdog timeout, until the node begins stopping.
void AgentSession::PollProgress() {
  loop_->progress_timer.expires_after(kProgressPollInterval);
  loop_->progress_timer.async_wait([this](boost::system::error_code ec) {
    if (ec || phase_ != Phase::kRunning || workers_.stopping()) return;
    Apply(progress_.Poll(assignment_.generation, Clock::now()));
    PollProgress();
  });
}

void AgentSession::Apply(const ProgressPoll& poll) {
  for (const std::string& warning : poll.warnings) std::cerr << Prefix() << warning << "\n";
  for (const control::WorkerProgress& p : poll.progress) Send(p);
  for (const Stall& stall : poll.stalls) OnStall(stall);
}

// A hung process cannot be trusted to stop on SIGTERM: SIGKILL to its process group. Its
// WORKER_EXITED follows when it is reaped.
void AgentSession::OnStall(const Stall& stall) {
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (workers_.rank(i) != stall.rank || workers_.state(i) != WorkerState::kRunning) continue;
    const pid_t pid = workers_.pid(i);
    const std::string state = StateOf(pid);
    std::cerr << Prefix() << DescribeStall(stall) << (state.empty() ? "" : " (" + state + ")") << "; killing it\n";
    Send(control::WorkerStalled{assignment_.generation, stall.rank, stall.last_step, stall.silence.count(),
                                stall.timeout.count(), state});
    SignalProcessGroup(pid, SIGKILL).IgnoreError();
  }
}

// When the node is told to stop, a worker found stopped (SIGSTOP, a debugger) is reported as
// stalled whatever its watchdog says: it cannot be progressing, and its peers on other nodes
// (waiting for it in a collective) may have been reported first (docs/elastic.md, "Which rank
// hung").
void AgentSession::ReportStoppedWorkers() {
  const auto now = Clock::now();
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (workers_.state(i) != WorkerState::kRunning) continue;
    const pid_t pid = workers_.pid(i);
    auto state = ProcessState(pid);
    if (!state || (*state != 'T' && *state != 't')) continue;
    const int rank = workers_.rank(i);
    const Stall stall = progress_.Describe(rank, now);
    std::cerr << Prefix() << "rank " << rank << " is stopped (last step "
              << (stall.last_step >= 0 ? std::to_string(stall.last_step) : std::string("none")) << ")\n";
    Send(control::WorkerStalled{assignment_.generation, rank, stall.last_step, stall.silence.count(),
                                stall.timeout.count(), ProcessStateName(*state)});
  }
}

// ---- What the control link tells ----

void AgentSession::OnMessage(control::Message message) {
  if (const auto* stop = std::get_if<control::Stop>(&message)) {
    if (stop->generation != assignment_.generation || phase_ != Phase::kRunning) return;  // stale
    if (!workers_.stopping()) ReportStoppedWorkers();
    BeginStop(std::chrono::milliseconds(stop->grace_period_ms));
  } else if (auto* next = std::get_if<control::Assignment>(&message)) {
    if (phase_ != Phase::kIdle || next->generation <= assignment_.generation) {
      std::cerr << Prefix() << "ignored an assignment for generation " << next->generation
                << " (at generation " << assignment_.generation << ", "
                << (phase_ == Phase::kIdle ? "waiting" : "not done") << ")\n";
      return;
    }
    StartNextGeneration(std::move(*next));
  } else if (const auto* release = std::get_if<control::Release>(&message)) {
    if (release->exit_code >= 0) released_code_ = release->exit_code;
    leaving_ = true;
    if (phase_ == Phase::kIdle) Exit();
  } else if (auto* peers = std::get_if<control::SnapshotPeers>(&message)) {
    if (peers->generation != assignment_.generation || !replication_) return;  // stale, or no copies here
    replication_->sender().SetPeers(std::move(peers->peers));
  }
}

void AgentSession::OnProxiedReply(std::string_view payload) {
  if (store_proxy_) store_proxy_->OnUpstreamReply(payload);
}

void AgentSession::OnLost(const LinkLoss& loss) {
  if (loss.kind == LinkLoss::Kind::kSilent) {
    lost_launcher_ = true;
    if (phase_ == Phase::kIdle) {
      std::cerr << Prefix() << loss.reason << ", exiting\n";
      exit_code_ = kAgentLostLauncher;
      Exit();
      return;
    }
    StopOnLostLauncher(loss.reason);
    return;
  }
  EndProxyGeneration();
  if (loss.kind == LinkLoss::Kind::kUnreadable || phase_ == Phase::kRunning) {
    StopOnLostLauncher(loss.reason);
  } else if (phase_ == Phase::kIdle) {
    // Between generations: the launcher is done with this node (or gone); nothing runs here.
    Exit();
  }
}

void AgentSession::OnWriteFailed() { EndProxyGeneration(); }

void AgentSession::OnFinished() { loop_->io.stop(); }

void AgentSession::OnWarning(std::string_view line) { std::cerr << Prefix() << line << "\n"; }

// ---- What the pipes tell ----

void AgentSession::OnOutput(control::Message message) { Send(message); }

void AgentSession::OnPipesClosed(size_t index) { MaybeReport(index); }

// ---- Small helpers ----

// No PROXIED of the generation follows on the wire, and its workers' calls in the proxy fail
// with kUnavailable.
void AgentSession::EndProxyGeneration() {
  if (store_proxy_) store_proxy_->EndGeneration();
}

void AgentSession::Send(const control::Message& m) { link_.Send(m); }

std::string AgentSession::Prefix() const {
  return "dslaunch-agent[node " + std::to_string(config_.node_rank) + "]: ";
}

}  // namespace dslaunch::agent
