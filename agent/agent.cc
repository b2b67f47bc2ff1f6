// The agent's I/O shell: control connection, worker pipes, SIGCHLD and stop timers, all on one
// Asio io_context thread. Bookkeeping lives in NodeWorkers, line handling in LineSplitter.
#include "agent/agent.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "agent/node/cpu_topology.h"
#include "agent/workers/line_splitter.h"
#include "agent/workers/log_files.h"
#include "agent/workers/log_writer.h"
#include "agent/node/node_fence.h"
#include "agent/workers/node_workers.h"
#include "agent/own_stop.h"
#include "agent/progress/progress_files.h"
#include "agent/progress/progress_watchdog.h"
#include "agent/node/secret_dir.h"
#include "agent/store_proxy/store_proxy.h"
#include "agent/workers/worker_env_on_node.h"
#include "agent/workers/worker_process.h"
#include "common/asio.h"
#include "common/auth/secret.h"
#include "common/control_messages.h"
#include "common/endpoint/endpoint_client.h"
#include "common/env_names.h"
#include "common/error_record.h"
#include "common/exit_codes.h"
#include "common/heartbeat.h"
#include "common/message_types.h"
#include "common/process_tree.h"
#include "common/route.h"
#include "common/text.h"
#include "dslaunch/config.h"

namespace dslaunch::agent {
namespace {

using Clock = std::chrono::steady_clock;

// Lines of a worker's stderr kept for the root-cause summary.
constexpr size_t kStderrTailLines = 20;
// After a worker is reaped, how long its pipes may stay open (held by a grandchild) before the
// agent stops reading them and reports the exit.
constexpr auto kOutputDrainTimeout = std::chrono::milliseconds(500);
// Bytes read from a pipe at a time.
constexpr size_t kReadChunkBytes = 64u << 10;
// How often the workers' progress files are polled (docs/elastic.md, "Hang detection and progress
// reports"): a stall is seen at most this long after the timeout, little next to the shortest
// sensible timeout (a second); one lstat per rank five times a second costs next to nothing.
constexpr auto kProgressPollInterval = std::chrono::milliseconds(200);

class AgentSession {
 public:
  AgentSession(asio::io_context& io, const AgentConfig& config, control::Assignment assignment,
               UniqueFd control_fd)
      : io_(io),
        config_(config),
        assignment_(std::move(assignment)),
        control_(io, control_fd.Release()),
        signals_(io, SIGCHLD, SIGTERM, SIGINT),
        kill_timer_(io),
        heartbeat_timer_(io),
        progress_timer_(io),
        watchdog_(kProgressPollInterval),
        launcher_heartbeat_(std::chrono::milliseconds(assignment_.heartbeat_timeout_ms), Clock::now()) {
    signals_.add(SIGHUP);
  }

  ~AgentSession() { ReleaseNode(); }

  // Final sweep, idempotent: no process of this node's workers outlives the agent, whether the
  // job failed or succeeded (their process groups, then every descendant that left them: the
  // agent is a child subreaper, so an orphan that called setsid() is still in its tree), and the
  // agent's private directory (the secret file, the store proxy's socket) goes. Runs before
  // AGENT_FAILED is sent, not only at the end: once the launcher hears of the failure it may end
  // the job and kill this agent at once, and a killed agent would leave the directory, with the
  // job's secret in it, until another agent of the user sweeps it (agent/node/secret_dir.h).
  void ReleaseNode() {
    for (pid_t pgid : workers_.AllGroups()) SignalProcessGroup(pgid, SIGKILL).IgnoreError();
    auto swept = KillAllDescendants();
    if (!swept.ok()) {
      std::cerr << Prefix() << "final sweep: " << swept.status().ToString() << "\n";
    } else if (*swept > 0) {
      std::cerr << Prefix() << "killed " << *swept << " leftover process" << (*swept == 1 ? "" : "es")
                << " of the job's workers\n";
    }
    if (!secret_dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(secret_dir_, ec);
      secret_dir_.clear();
    }
  }

  Status Start() {
    // Orphaned descendants of the workers are re-parented to the agent, so they can be found
    // and stopped with the job (common/process_tree.h).
    DSLAUNCH_RETURN_IF_ERROR(BecomeChildSubreaper());
    // Before anything else (the sweep of stale directories in PrepareSecretFile would remove a
    // killed agent's record): no worker of the agent that held this place before may run beside ours.
    DSLAUNCH_RETURN_IF_ERROR(FenceNode());
    DSLAUNCH_RETURN_IF_ERROR(PrepareSecretFile());
    StartStoreProxy();
    DSLAUNCH_ASSIGN_OR_RETURN(
        JobLogDir logs,
        JobLogDir::Open({assignment_.log_dir, config_.runtime_dir, config_.job_id, ::getuid()}));
    logs_ = std::make_unique<JobLogDir>(std::move(logs));
    job_dir_ = std::filesystem::absolute(logs_->path()).string();
    DSLAUNCH_ASSIGN_OR_RETURN(std::vector<WorkerLogs> worker_logs, CreateWorkerLogs());
    WaitForSignal();
    ReadControl();
    ScheduleHeartbeat();
    return StartWorkers(std::move(worker_logs));
  }

  // Tells the launcher why this node cannot run its assignment (AGENT_FAILED), before the agent
  // exits: the launcher reports this as the root cause instead of a lost agent. Blocking; used
  // when Start() failed, with the event loop not running.
  void ReportFailure(const Status& why) {
    EndProxyGeneration();
    wire::Frame f = control::Encode(control::AgentFailed{assignment_.generation, why.message()});
    std::string bytes = wire::EncodeFrame(f.type, f.payload);
    boost::system::error_code ignored;
    asio::write(control_, asio::buffer(bytes), ignored);  // a broken connection has no one to tell
  }

  int exit_code() const {
    return config_.slots > 0 ? NodeModeExitCode(released_code_, stop_signal_) : exit_code_;
  }

 private:
  // kRunning: the workers of assignment_'s generation run or are being reported. kIdle: all of
  // them were reported (AGENT_DONE sent) and the assignment is restartable: the agent waits for
  // the next generation's ASSIGNMENT or RELEASE. kExiting: the event loop stops once the outbox
  // is flushed.
  enum class Phase { kRunning, kIdle, kExiting };

  struct Pipe {
    std::unique_ptr<asio::posix::stream_descriptor> fd;
    LineSplitter splitter;
    LogWriter log;
    std::array<char, kReadChunkBytes> buffer{};  // Worker lives on the heap, so this does too
    bool open = true;
  };
  // A worker's log files, created before any worker starts, and where its error record goes.
  struct WorkerLogs {
    JobLogDir::WorkerLogs files;
    std::string progress_file;  // DSLAUNCH_PROGRESS_FILE
  };
  // Every log file of the generation before any worker: a log directory or file that cannot be
  // used stops the node with nothing started. Names per generation (log_files.h), so that a later
  // generation never reuses a file.
  Result<std::vector<WorkerLogs>> CreateWorkerLogs() {
    std::vector<WorkerLogs> worker_logs;
    const int generation = assignment_.generation;
    for (const auto& spec : assignment_.workers) {
      WorkerLogs l;
      DSLAUNCH_ASSIGN_OR_RETURN(l.files, logs_->CreateWorkerLogs(spec.rank, generation));
      DSLAUNCH_ASSIGN_OR_RETURN(l.progress_file, CreateProgressFile(*logs_, spec.rank, generation));
      worker_logs.push_back(std::move(l));
    }
    return worker_logs;
  }

  Status StartWorkers(std::vector<WorkerLogs> worker_logs) {
    master_interface_ = MasterInterface();
    // --bind_cores_to_rank: every rank's cores, split before any worker starts.
    DSLAUNCH_ASSIGN_OR_RETURN(std::vector<RankCores> cores, AssignedCores(assignment_));
    for (size_t i = 0; i < assignment_.workers.size(); ++i) {
      const auto& spec = assignment_.workers[i];
      Status started = StartWorker(spec, std::move(worker_logs[i]), cores.empty() ? RankCores{} : cores[i]);
      DSLAUNCH_RETURN_IF_ERROR(started.WithContext("rank " + std::to_string(spec.rank)));
    }
    if (assignment_.workers.empty()) Finish();
    PollProgress();
    return Status::Ok();
  }

  // The interface of this node's route to the generation's MASTER_ADDR (NCCL_SOCKET_IFNAME's
  // default), or "" with one line saying why when it cannot be found.
  std::string MasterInterface() const {
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

  // The next generation's assignment, received while idle.
  void StartNextGeneration(control::Assignment next) {
    // The finished generation's workers have all been reported: their pipes are closed and any
    // handler of theirs still queued (an aborted read) runs before this posted destruction.
    asio::post(io_, [retired = std::move(running_)] {});
    running_.clear();
    workers_ = NodeWorkers();
    assignment_ = std::move(next);
    phase_ = Phase::kRunning;
    // The previous generation's workers lost the proxy before AGENT_DONE; this one's are served
    // from now on (docs/protocol.md, "Store proxy").
    if (store_proxy_) store_proxy_->BeginGeneration(assignment_.generation);
    auto logs = CreateWorkerLogs();
    Status started = logs.ok() ? StartWorkers(std::move(*logs)) : logs.status();
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

  struct Worker {
    size_t index = 0;
    int rank = 0;
    std::string err_log_path;
    std::string error_file;  // TORCHELASTIC_ERROR_FILE
    Pipe out, err;
    TailBuffer err_tail{kStderrTailLines};
    std::unique_ptr<asio::steady_timer> drain_timer;
  };

  std::string Prefix() const { return "dslaunch-agent[node " + std::to_string(config_.node_rank) + "]: "; }

  // The node was lost and is re-admitted (ASSIGNMENT's fence_agent_pid): the earlier agent and
  // the workers it recorded are killed and gone before this agent starts any (docs/elastic.md,
  // "Fencing a lost node").
  Status FenceNode() {
    if (assignment_.fence_agent_pid <= 0) return Status::Ok();
    const auto pid = static_cast<pid_t>(assignment_.fence_agent_pid);
    auto fenced = FenceEarlierAgent(config_.runtime_dir, config_.job_id, pid, OwnPidNamespace());
    if (!fenced.ok()) return fenced.status();
    std::cerr << Prefix() << "fenced the node: " << DescribeFence(*fenced, pid) << "\n";
    return Status::Ok();
  }

  // Records a started worker for the next agent of this node (agent/node/fence_record.h).
  Status RecordWorker(int rank, pid_t pid) {
    if (fence_record_.agent.pid == 0) {
      auto self = ReadProcessEntry(::getpid());
      if (!self) return InternalError("fence record: cannot read /proc/self/stat");
      fence_record_.agent = {::getpid(), self->start_time};
    }
    auto entry = ReadProcessEntry(pid);
    if (!entry) return InternalError("fence record: cannot read /proc/" + std::to_string(pid) + "/stat");
    fence_record_.workers.push_back({assignment_.generation, rank, {pid, entry->start_time}});
    return WriteFenceRecord(secret_dir_, fence_record_);
  }

  Status PrepareSecretFile() {
    // Directories of agents killed before they could clean up (SIGKILL) go first.
    const std::string pid_namespace = OwnPidNamespace();
    RemoveStaleSecretDirs(config_.runtime_dir, pid_namespace);
    secret_dir_ = config_.runtime_dir + "/" + SecretDirName(config_.job_id, config_.node_rank, ::getpid());
    if (::mkdir(secret_dir_.c_str(), 0700) != 0) {
      std::string dir = secret_dir_;
      secret_dir_.clear();
      return ErrnoError("mkdir " + dir, errno);
    }
    if (!(std::ofstream(secret_dir_ + "/" + kPidNamespaceFile) << pid_namespace << "\n")) {
      return InternalError("cannot write " + secret_dir_ + "/" + kPidNamespaceFile);
    }
    secret_file_ = secret_dir_ + "/store.secret";
    return WriteSecretFile(secret_file_, config_.secret);
  }

  // Serves the workers' store traffic on a socket in the private directory, when the launcher asks
  // for it, carried on the control connection (docs/protocol.md, "Store proxy"). A socket that
  // cannot be made (a path too long for a Unix socket, a file system without sockets) leaves this
  // node's workers on the direct path, with one line saying so: the job still runs, as it did
  // before the proxy.
  void StartStoreProxy() {
    if (!assignment_.store_proxy) return;
    StoreProxyOptions o{secret_dir_ + "/" + kStoreProxySocketName, config_.job_id, config_.secret,
                        [this](std::string payload) { SendFrame(msg::kStoreProxied, std::move(payload)); },
                        [prefix = Prefix()](std::string_view line) { std::cerr << prefix << line << "\n"; }};
    auto proxy = StoreProxy::Listen(io_, std::move(o));
    if (!proxy.ok()) {
      std::cerr << Prefix() << "store proxy off on this node, its workers reach the launcher directly: "
                << proxy.status().message() << "\n";
      return;
    }
    store_proxy_ = std::move(*proxy);
    store_proxy_->BeginGeneration(assignment_.generation);
  }

  // Before AGENT_DONE or AGENT_FAILED of the generation, and when the launcher is lost: no PROXIED
  // of it follows on the wire, and its workers' calls in the proxy fail with kUnavailable.
  void EndProxyGeneration() {
    if (store_proxy_) store_proxy_->EndGeneration();
  }

  // The first kMaxErrorRecordBytes of a worker's error file; empty if it wrote none.
  static std::string ReadErrorFile(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.get() < 0) return "";
    std::string text(kMaxErrorRecordBytes, '\0');
    size_t got = 0;
    while (got < text.size()) {
      ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    text.resize(got);
    return text;
  }

  Status StartWorker(const control::WorkerAssignment& spec, WorkerLogs logs, const RankCores& cores) {
    auto w = std::make_unique<Worker>();
    w->rank = spec.rank;
    w->err_log_path = std::move(logs.files.err_path);
    w->out.log = LogWriter(std::move(logs.files.out), std::move(logs.files.out_path));
    w->err.log = LogWriter(std::move(logs.files.err), w->err_log_path);
    w->error_file = std::move(logs.files.error_file);
    std::map<std::string, std::string> env = spec.env;
    env[env::kErrorFile] = w->error_file;
    env[env::kProgressFile] = logs.progress_file;
    // Watched from before the start: a report written at once is not taken for the baseline.
    progress_files_.Watch(spec.rank, logs.progress_file);
    watchdog_.Start(spec.rank, Clock::now(), std::chrono::milliseconds(assignment_.watchdog_timeout_ms));
    NodeFacts node{config_.cores, static_cast<int>(assignment_.workers.size()), secret_file_,
                   store_proxy_ ? store_proxy_->address() : config_.endpoint, job_dir_, master_interface_,
                   static_cast<int>(cores.cpus.size()), config_.endpoint};
    ProcessLaunch launch{spec.argv, CompleteWorkerEnvironment(config_.environment, assignment_.env, env, node),
                         assignment_.working_dir, cores.cpus, cores.numa_node};
    DSLAUNCH_ASSIGN_OR_RETURN(SpawnedProcess p, SpawnInOwnProcessGroup(launch));
    w->index = workers_.Add(spec.rank, p.pid);
    Status recorded = RecordWorker(spec.rank, p.pid);
    w->out.fd = std::make_unique<asio::posix::stream_descriptor>(io_, p.stdout_fd.Release());
    w->err.fd = std::make_unique<asio::posix::stream_descriptor>(io_, p.stderr_fd.Release());
    w->drain_timer = std::make_unique<asio::steady_timer>(io_);
    Worker* raw = w.get();
    running_.push_back(std::move(w));
    Send(control::WorkerStarted{assignment_.generation, spec.rank, p.pid, raw->err_log_path});
    Read(*raw, raw->out, control::Stream::kStdout);
    Read(*raw, raw->err, control::Stream::kStderr);
    if (workers_.stopping()) SignalProcessGroup(p.pid, SIGTERM).IgnoreError();
    return recorded;  // a worker the next agent could not fence stops the node (it is running: reported as usual)
  }

  void Read(Worker& w, Pipe& pipe, control::Stream stream) {
    pipe.fd->async_read_some(
        asio::buffer(pipe.buffer), [this, &w, &pipe, stream](boost::system::error_code ec, size_t n) {
          if (n > 0) Deliver(w, stream, pipe, pipe.splitter.Feed({pipe.buffer.data(), n}));
          if (ec) {
            ClosePipe(w, pipe, stream);
            return;
          }
          Read(w, pipe, stream);
        });
  }

  void ClosePipe(Worker& w, Pipe& pipe, control::Stream stream) {
    if (!pipe.open) return;
    pipe.open = false;
    Deliver(w, stream, pipe, pipe.splitter.Finish());
    if (pipe.log.lost()) SendOutputLost(w, pipe, stream, /*final=*/true);
    boost::system::error_code ignored;
    pipe.fd->close(ignored);
    MaybeReport(w);
  }

  void SendOutputLost(const Worker& w, const Pipe& pipe, control::Stream stream, bool final) {
    Send(control::OutputLost{assignment_.generation, w.rank, stream, pipe.log.path(), pipe.log.first_error(),
                             pipe.log.lost_bytes(), pipe.log.lost_lines(), final});
  }

  void Deliver(Worker& w, control::Stream stream, Pipe& pipe, std::vector<std::string> lines) {
    if (lines.empty()) return;
    std::string block;
    for (const auto& l : lines) {
      if (control::IsTransientLine(l)) continue;  // progress redraws go to the console, not into the record
      block += l;
      block += '\n';
    }
    // The log is the record of the run: a full disk must not stop the job, nor go unnoticed. The
    // launcher hears of the first failed write of each file (it tells the user at once and again
    // at the end), and of the totals when the stream closes.
    if (!block.empty() && pipe.log.Append(block).has_value()) SendOutputLost(w, pipe, stream, /*final=*/false);
    if (stream == control::Stream::kStderr) {
      for (const auto& l : lines) {
        if (!control::IsTransientLine(l)) w.err_tail.Add(l);
      }
    }
    if (assignment_.tee) {
      Send(control::Output{assignment_.generation, w.rank, stream, std::move(lines)});
    }
  }

  void WaitForSignal() {
    signals_.async_wait([this](boost::system::error_code ec, int sig) {
      if (ec) return;
      if (sig == SIGCHLD) {
        Reap();
      } else if (phase_ == Phase::kIdle) {
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
      WaitForSignal();
    });
  }

  void Reap() {
    while (true) {
      int st = 0;
      pid_t pid = ::waitpid(-1, &st, WNOHANG);
      if (pid <= 0) return;
      auto index = workers_.OnReaped(pid, ExitStatus::FromWaitStatus(st));
      if (!index) continue;
      Worker& w = *running_[*index];
      // A report written just before the exit still gives the rank's last step.
      if (auto last = progress_files_.Finish(w.rank)) OnProgressEvent(*last, Clock::now());
      watchdog_.OnExited(w.rank);
      if (w.out.open || w.err.open) {
        w.drain_timer->expires_after(kOutputDrainTimeout);
        w.drain_timer->async_wait([this, &w](boost::system::error_code ec) {
          if (ec) return;
          ClosePipe(w, w.out, control::Stream::kStdout);
          ClosePipe(w, w.err, control::Stream::kStderr);
        });
      }
      MaybeReport(w);
    }
  }

  void MaybeReport(Worker& w) {
    if (workers_.state(w.index) != WorkerState::kExited || w.out.open || w.err.open) return;
    w.drain_timer->cancel();
    control::WorkerExited m;
    m.generation = assignment_.generation;
    m.rank = w.rank;
    m.pid = workers_.pid(w.index);
    m.status = *workers_.status(w.index);
    m.stopped = workers_.stopped(w.index);
    m.stderr_tail = w.err_tail.Lines();
    m.log_path = w.err_log_path;
    m.error_record = ReadErrorFile(w.error_file);
    m.last_step = watchdog_.last_step(w.rank);
    Send(m);
    workers_.MarkReported(w.index);
    if (workers_.AllReported()) Finish();
  }

  // Stops the workers for a reason of the agent's own, telling the launcher first (AGENT_STOPPING)
  // so that the reason, not the workers' SIGTERM exits, becomes the job's root cause.
  void StopOnOwn(std::string reason, std::chrono::milliseconds grace, int signal = 0) {
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
  void StopOnLostLauncher(std::string reason) {
    lost_launcher_ = true;
    StopOnOwn(std::move(reason), OwnStopGrace(OwnStopCause::kLostLauncher, assignment_));
  }

  void BeginStop(std::chrono::milliseconds grace) {
    const Clock::time_point kill_at = Clock::now() + grace;
    if (workers_.stopping()) {
      // A later stop with a shorter grace period (the launcher interrupted again, or a second
      // SIGINT here) brings the SIGKILL forward; nothing postpones it.
      if (phase_ == Phase::kRunning && kill_at < kill_at_) ArmKill(kill_at);
      return;
    }
    workers_.BeginStop();
    progress_timer_.cancel();  // the job is ending: no rank is stalled any more
    for (pid_t pgid : workers_.RunningGroups()) SignalProcessGroup(pgid, SIGTERM).IgnoreError();
    // Processes that left the workers' groups are part of the job too: they get the same SIGTERM
    // (once: members of a worker's group were signalled through it).
    SignalDescendants(SIGTERM, workers_.AllGroups()).status().IgnoreError();
    ArmKill(kill_at);
    if (running_.empty() || workers_.AllReported()) Finish();
  }

  void ArmKill(Clock::time_point kill_at) {
    kill_at_ = kill_at;
    kill_timer_.expires_at(kill_at);
    kill_timer_.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      for (pid_t pgid : workers_.AllGroups()) {
        if (ProcessGroupExists(pgid)) SignalProcessGroup(pgid, SIGKILL).IgnoreError();
      }
      SignalDescendants(SIGKILL).status().IgnoreError();
    });
  }

  void ReadControl() {
    control_.async_read_some(asio::buffer(control_buf_), [this](boost::system::error_code ec, size_t n) {
      if (ec) {
        EndProxyGeneration();
        if (phase_ == Phase::kRunning) {
          StopOnLostLauncher("lost the connection to the launcher (" + ec.message() + ")");
        } else if (phase_ == Phase::kIdle) {
          // Between generations: the launcher is done with this node (or gone); nothing runs here.
          control_closed_ = true;
          Exit();
        }
        return;
      }
      decoder_.Feed(control_buf_.data(), n);
      while (true) {
        auto frame = decoder_.Next();
        if (!frame.ok() || !frame->has_value()) {
          if (!frame.ok()) {
            EndProxyGeneration();
            StopOnLostLauncher("unreadable control stream from the launcher: " + frame.status().ToString());
            return;
          }
          break;
        }
        OnControlFrame(**frame);
      }
      ReadControl();
    });
  }

  // Sends a heartbeat every interval and watches the launcher's: a launcher that has been silent
  // for the timeout (crashed host, cut network: the TCP connection may look open for minutes) is
  // treated like a closed connection.
  void ScheduleHeartbeat() {
    if (assignment_.heartbeat_interval_ms <= 0) return;
    heartbeat_timer_.expires_after(std::chrono::milliseconds(assignment_.heartbeat_interval_ms));
    heartbeat_timer_.async_wait([this](boost::system::error_code ec) {
      if (ec || phase_ == Phase::kExiting) return;
      const auto now = Clock::now();
      const std::chrono::milliseconds timeout(assignment_.heartbeat_timeout_ms);
      if (CheckerWasSuspended(last_heartbeat_check_, now, timeout)) {
        // The agent itself was not running (stopped, frozen): the launcher's silence is not its fault.
        launcher_heartbeat_.OnHeard(now);
      }
      last_heartbeat_check_ = now;
      if (assignment_.heartbeat_timeout_ms > 0 && !lost_launcher_ && launcher_heartbeat_.Expired(now)) {
        lost_launcher_ = true;
        const std::string why = "no heartbeat from the launcher for " +
                                FormatSeconds(launcher_heartbeat_.Silence(now)) + " (was it stopped or cut off?)";
        if (phase_ == Phase::kIdle) {
          std::cerr << Prefix() << why << ", exiting\n";
          exit_code_ = kAgentLostLauncher;
          Exit();
          return;
        }
        StopOnLostLauncher(why);
      }
      Send(control::Heartbeat{assignment_.generation, ++heartbeat_sequence_});
      ScheduleHeartbeat();
    });
  }

  // Polls the workers' progress files and kills the ranks that have been silent for longer than
  // their watchdog timeout (agent/progress/progress_watchdog.h), until the node begins stopping.
  void PollProgress() {
    progress_timer_.expires_after(kProgressPollInterval);
    progress_timer_.async_wait([this](boost::system::error_code ec) {
      if (ec || phase_ != Phase::kRunning || workers_.stopping()) return;
      const auto now = Clock::now();
      for (const ProgressFileEvent& e : progress_files_.Poll()) OnProgressEvent(e, now);
      for (const Stall& stall : watchdog_.Check(now)) OnStall(stall);
      PollProgress();
    });
  }

  // A write to a rank's progress file: the watchdog hears of it, and the launcher of what it said
  // when it holds a step or a figure (WORKER_PROGRESS, one per rank per poll at most: the poll
  // sees a file's last state).
  void OnProgressEvent(const ProgressFileEvent& e, Clock::time_point now) {
    if (e.warning) std::cerr << Prefix() << *e.warning << "\n";
    if (!e.report) return;
    watchdog_.OnReport(e.rank, now, *e.report);
    if (e.report->step || !e.report->figures.empty()) {
      Send(control::WorkerProgress{assignment_.generation, e.rank, e.report->step.value_or(-1), e.report->figures});
    }
  }

  // A hung process cannot be trusted to stop on SIGTERM: SIGKILL to its process group. Its
  // WORKER_EXITED follows when it is reaped.
  void OnStall(const Stall& stall) {
    for (const auto& w : running_) {
      if (w->rank != stall.rank || workers_.state(w->index) != WorkerState::kRunning) continue;
      const pid_t pid = workers_.pid(w->index);
      const std::string state = StateOf(pid);
      std::cerr << Prefix() << DescribeStall(stall) << (state.empty() ? "" : " (" + state + ")") << "; killing it\n";
      Send(control::WorkerStalled{assignment_.generation, stall.rank, stall.last_step, stall.silence.count(),
                                  stall.timeout.count(), state});
      SignalProcessGroup(pid, SIGKILL).IgnoreError();
    }
  }

  static std::string StateOf(pid_t pid) {
    auto state = ProcessState(pid);
    return state ? ProcessStateName(*state) : std::string();
  }

  // When the node is told to stop, a worker found stopped (SIGSTOP, a debugger) is reported as
  // stalled whatever its watchdog says: it cannot be progressing, and its peers on other nodes
  // (waiting for it in a collective) may have been reported first (docs/elastic.md, "Which rank
  // hung").
  void ReportStoppedWorkers() {
    const auto now = Clock::now();
    for (const auto& w : running_) {
      if (workers_.state(w->index) != WorkerState::kRunning) continue;
      const pid_t pid = workers_.pid(w->index);
      auto state = ProcessState(pid);
      if (!state || (*state != 'T' && *state != 't')) continue;
      const Stall stall = watchdog_.Describe(w->rank, now);
      std::cerr << Prefix() << "rank " << w->rank << " is stopped (last step "
                << (stall.last_step >= 0 ? std::to_string(stall.last_step) : std::string("none")) << ")\n";
      Send(control::WorkerStalled{assignment_.generation, w->rank, stall.last_step, stall.silence.count(),
                                  stall.timeout.count(), ProcessStateName(*state)});
    }
  }

  void OnControlFrame(const wire::Frame& frame) {
    launcher_heartbeat_.OnHeard(Clock::now());
    if (frame.type == msg::kStoreProxiedReply) {  // the store proxy shares the connection
      if (store_proxy_) store_proxy_->OnUpstreamReply(frame.payload);
      return;
    }
    auto msg = control::Decode(frame);
    if (!msg.ok()) {
      std::cerr << Prefix() << msg.status().ToString() << "\n";
      return;
    }
    if (const auto* stop = std::get_if<control::Stop>(&*msg)) {
      if (stop->generation != assignment_.generation || phase_ != Phase::kRunning) return;  // stale
      if (!workers_.stopping()) ReportStoppedWorkers();
      BeginStop(std::chrono::milliseconds(stop->grace_period_ms));
    } else if (auto* next = std::get_if<control::Assignment>(&*msg)) {
      if (phase_ != Phase::kIdle || next->generation <= assignment_.generation) {
        std::cerr << Prefix() << "ignored an assignment for generation " << next->generation
                  << " (at generation " << assignment_.generation << ", "
                  << (phase_ == Phase::kIdle ? "waiting" : "not done") << ")\n";
        return;
      }
      StartNextGeneration(std::move(*next));
    } else if (const auto* release = std::get_if<control::Release>(&*msg)) {
      if (release->exit_code >= 0) released_code_ = release->exit_code;
      leaving_ = true;
      if (phase_ == Phase::kIdle) Exit();
    }
  }

  void Send(const control::Message& m) {
    wire::Frame f = control::Encode(m);
    SendFrame(f.type, f.payload);
  }

  void SendFrame(uint8_t type, std::string_view payload) {
    if (control_closed_) return;
    outbox_.push_back(wire::EncodeFrame(type, payload));
    if (outbox_.size() == 1) Flush();
  }

  void Flush() {
    asio::async_write(control_, asio::buffer(outbox_.front()),
                      [this](boost::system::error_code ec, size_t) {
                        if (ec) {
                          control_closed_ = true;
                          outbox_.clear();
                          EndProxyGeneration();
                          if (phase_ == Phase::kExiting) io_.stop();
                          return;
                        }
                        outbox_.pop_front();
                        if (!outbox_.empty()) {
                          Flush();
                        } else if (phase_ == Phase::kExiting) {
                          io_.stop();
                        }
                      });
  }

  // Every worker of the generation has been reported.
  void Finish() {
    if (phase_ != Phase::kRunning) return;
    kill_timer_.cancel();
    progress_timer_.cancel();
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

  void Exit() {
    if (phase_ == Phase::kExiting) return;
    phase_ = Phase::kExiting;
    kill_timer_.cancel();
    heartbeat_timer_.cancel();
    // Without a launcher to hear it, the flush may never complete (a cut network): do not wait.
    if (outbox_.empty() || lost_launcher_ || control_closed_) io_.stop();
  }

  asio::io_context& io_;
  const AgentConfig& config_;
  control::Assignment assignment_;
  asio::posix::stream_descriptor control_;
  asio::signal_set signals_;
  asio::steady_timer kill_timer_;
  Clock::time_point kill_at_;  // when kill_timer_ sends SIGKILL, once stopping
  asio::steady_timer heartbeat_timer_;
  asio::steady_timer progress_timer_;
  ProgressFiles progress_files_;
  ProgressWatchdog watchdog_;
  HeartbeatMonitor launcher_heartbeat_;
  Clock::time_point last_heartbeat_check_ = Clock::now();
  uint64_t heartbeat_sequence_ = 0;
  std::array<char, kReadChunkBytes> control_buf_{};
  wire::FrameDecoder decoder_;
  std::deque<std::string> outbox_;
  NodeWorkers workers_;
  std::vector<std::unique_ptr<Worker>> running_;
  std::string secret_dir_, secret_file_;
  std::unique_ptr<StoreProxy> store_proxy_;  // null: the workers reach the launcher directly
  FenceRecord fence_record_;  // what this agent started, on disk in secret_dir_ (agent/node/fence_record.h)
  std::unique_ptr<JobLogDir> logs_;
  std::string job_dir_;  // the job's log directory on this node (DSLAUNCH_JOB_DIR)
  std::string master_interface_;  // MasterInterface() of the current generation
  Phase phase_ = Phase::kRunning;
  bool leaving_ = false;  // the agent exits after this generation (a signal, RELEASE, lost launcher)
  bool lost_launcher_ = false;
  bool control_closed_ = false;
  int exit_code_ = kAgentOk;
  std::optional<int> released_code_;  // the job's exit code, from RELEASE
  int stop_signal_ = 0;               // the signal that stopped the agent, if one did
};

// How long the agent waits for its assignment once registered: in node mode until the membership
// is complete, at most its join timeout (the host waits as long for the others, plus its last call).
Clock::duration AssignmentTimeout(const AgentConfig& config) {
  if (config.slots > 0) return config.join_timeout;
  return kAssignmentTimeout;
}

// Registers and waits for the assignment. A RELEASE instead (node mode: the job ended while this
// node waited to be let in) is kUnavailable, with the job's exit code in `released`.
Result<control::Assignment> Register(int fd, const AgentConfig& config, std::optional<int>& released) {
  control::Register reg;
  reg.job_id = config.job_id;
  reg.node_rank = config.node_rank;
  reg.version = DSLAUNCH_VERSION;
  reg.host = config.host;
  reg.pid = ::getpid();
  reg.slots = config.slots;
  reg.hosts_endpoint = config.hosts_endpoint;
  wire::Frame f = control::Encode(reg);
  DSLAUNCH_RETURN_IF_ERROR(SendFrame(fd, f.type, f.payload));
  wire::FrameDecoder decoder;
  const Clock::time_point deadline = Clock::now() + AssignmentTimeout(config);
  wire::Frame reply;
  control::Message msg;
  do {  // a node that rejoins a running job may hear heartbeats before its assignment
    DSLAUNCH_ASSIGN_OR_RETURN(reply, ReceiveFrame(fd, decoder, deadline));
    DSLAUNCH_ASSIGN_OR_RETURN(msg, control::Decode(reply));
  } while (std::holds_alternative<control::Heartbeat>(msg));
  if (auto* stop = std::get_if<control::Stop>(&msg)) {
    return AbortedError("the launcher refused this agent: " + stop->reason);
  }
  if (auto* release = std::get_if<control::Release>(&msg)) {
    if (release->exit_code >= 0) released = release->exit_code;
    const std::string code = "(exit code " + std::to_string(release->exit_code) + ")";
    if (!release->reason.empty()) return UnavailableError("the launcher did not let this node in: " + release->reason + " " + code);
    return UnavailableError("the launcher ended the job before it started " + code);
  }
  auto* assignment = std::get_if<control::Assignment>(&msg);
  if (assignment == nullptr) {
    return InvalidArgumentError("expected an assignment, got message type " + std::to_string(reply.type));
  }
  return std::move(*assignment);
}

}  // namespace

int NodeModeExitCode(std::optional<int> released_code, int stop_signal) {
  if (released_code) return *released_code;
  if (stop_signal > 0) return ShellExitCode(ExitStatus::Signaled(stop_signal));
  return kExitInfrastructure;
}

int RunAgent(const AgentConfig& config) {
  const bool node_mode = config.slots > 0;
  std::string prefix = "dslaunch-agent[" + (node_mode ? config.host : "node " + std::to_string(config.node_rank)) + "]: ";
  // In node mode the launcher may come up minutes after this node (pods start in any order).
  const auto connect_timeout = node_mode ? std::chrono::duration_cast<Clock::duration>(config.join_timeout)
                                         : std::chrono::duration_cast<Clock::duration>(kConnectTimeout);
  auto fd = ConnectToEndpoint(config.endpoint, config.job_id, config.secret, PeerRole::kAgent,
                              /*generation=*/0, Clock::now() + connect_timeout);
  if (!fd.ok()) {
    std::cerr << prefix << "cannot reach the launcher at " << config.endpoint << ": "
              << fd.status().ToString() << "\n";
    return node_mode ? kExitInfrastructure : kAgentStartupFailed;
  }
  std::optional<int> released;
  auto assignment = Register(fd->get(), config, released);
  if (!assignment.ok()) {
    std::cerr << prefix << "registration failed: " << assignment.status().ToString() << "\n";
    if (!node_mode) return kAgentStartupFailed;
    if (released) return *released;
    // Refused (a taken node rank, a node too many, another version): the command line is wrong.
    return assignment.status().code() == StatusCode::kAborted ? kExitUsage : kExitInfrastructure;
  }
  asio::io_context io;
  AgentSession session(io, config, std::move(*assignment), std::move(*fd));
  Status started = session.Start();
  if (!started.ok()) {
    std::cerr << prefix << "cannot start workers: " << started.ToString() << "\n";
    // Workers already started are stopped, and the private directory removed, before the launcher
    // hears of the failure (it may kill this agent as soon as it has). In node mode this is the
    // node's exit code: the infrastructure class, as the host reports the job (a scheduler's
    // podFailurePolicy cannot tell the agent's own code 3 from a rank's).
    session.ReleaseNode();
    session.ReportFailure(started);
    return node_mode ? kExitInfrastructure : kAgentStartupFailed;
  }
  io.run();
  return session.exit_code();
}

}  // namespace dslaunch::agent
