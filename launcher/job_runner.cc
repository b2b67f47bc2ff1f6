#include "launcher/job_runner.h"

#include <csignal>

#include "common/asio.h"
#include "common/control_messages.h"
#include "common/endpoint.h"
#include "common/heartbeat.h"
#include "common/store_service.h"
#include "common/text.h"
#include "dslaunch/config.h"
#include "launcher/job_tracker.h"

namespace dslaunch::launcher {

using Clock = std::chrono::steady_clock;

class JobRunner::Impl {
 public:
  Impl(JobRunnerOptions options, std::string job_id, std::string secret, AgentStarter& starter,
       Console& console)
      : options_(std::move(options)),
        job_id_(std::move(job_id)),
        secret_(std::move(secret)),
        starter_(starter),
        console_(console),
        signals_(io_, SIGINT, SIGTERM, SIGHUP),
        registration_timer_(io_),
        stop_timer_(io_),
        heartbeat_timer_(io_) {}

  ~Impl() {
    // Handles join their reporting threads; their callbacks post to io_, which outlives them.
    handles_.clear();
  }

  Status Listen() {
    EndpointOptions eo;
    eo.bind_address = options_.bind_address;
    eo.port = options_.port;
    eo.job_id = job_id_;
    eo.secret = secret_;
    DSLAUNCH_ASSIGN_OR_RETURN(endpoint_, Endpoint::Listen(io_, std::move(eo)));
    store_ = StoreService::Attach(io_, *endpoint_);
    endpoint_->SetSessionFactory(PeerRole::kAgent, [this](std::shared_ptr<EndpointConnection> c) {
      return std::make_unique<AgentSession>(*this, std::move(c));
    });
    return Status::Ok();
  }

  uint16_t port() const { return endpoint_->port(); }

  int Run(const LaunchPlan& plan) {
    constexpr int kPreflightFailed = 1;
    plan_ = &plan;
    tracker_ = std::make_unique<JobTracker>(plan);
    const size_t n = plan.nodes.size();
    sessions_.assign(n, nullptr);
    handles_.resize(n);
    agent_exited_.assign(n, false);
    for (size_t i = 0; i < n; ++i) heartbeats_.emplace_back(options_.heartbeat_timeout, Clock::now());

    Status preflight = starter_.Preflight(
        plan.nodes, PreflightChecks{options_.agent_path, options_.agent_version, options_.working_dir});
    if (!preflight.ok()) {
      console_.PrintError("dslaunch: " + preflight.message() + (preflight.message().ends_with("\n") ? "" : "\n"));
      return kPreflightFailed;
    }

    WaitForSignal();
    registration_timer_.expires_after(kRegistrationTimeout);
    registration_timer_.async_wait([this](boost::system::error_code ec) {
      if (ec || tracker_->state() != JobState::kStarting) return;
      Apply(tracker_->OnStartupFailed("not every agent registered within " +
                                      std::to_string(kRegistrationTimeout.count()) + " s"));
    });
    last_heartbeat_check_ = Clock::now();
    ScheduleHeartbeat();
    for (const auto& node : plan.nodes) StartAgent(node);
    // If the job already finished (no agent could start), Apply() has stopped io_ and run()
    // returns at once.
    io_.run();
    return tracker_->ExitCode();
  }

 private:
  // The control-plane session of one agent.
  class AgentSession : public SessionHandler {
   public:
    AgentSession(Impl& runner, std::shared_ptr<EndpointConnection> conn)
        : runner_(runner), conn_(std::move(conn)) {}

    Status OnFrame(wire::Frame frame) override {
      DSLAUNCH_ASSIGN_OR_RETURN(control::Message msg, control::Decode(frame));
      if (node_rank_ < 0) {
        auto* reg = std::get_if<control::Register>(&msg);
        if (reg == nullptr) return InvalidArgumentError("agent " + conn_->peer() + ": first message must be register");
        return runner_.OnRegister(*this, *reg);
      }
      runner_.OnAgentMessage(node_rank_, msg);
      return Status::Ok();
    }

    // The session is destroyed soon after; the runner forgets it here (its destructor may run
    // when the runner is already gone, at shutdown).
    void OnClose(const Status& why) override {
      if (node_rank_ < 0) return;
      if (runner_.sessions_[node_rank_] == this) runner_.sessions_[node_rank_] = nullptr;
      runner_.OnAgentClosed(node_rank_, why);
    }

    void Send(const control::Message& m) {
      wire::Frame f = control::Encode(m);
      conn_->Send(f.type, std::move(f.payload));
    }
    void Close() { conn_->Close(); }

    int node_rank_ = -1;

   private:
    Impl& runner_;
    std::shared_ptr<EndpointConnection> conn_;
  };

  void StartAgent(const NodePlan& node) {
    const int rank = node.node_rank;
    AgentCommand command{options_.agent_path, options_.advertise_host, port(), job_id_, rank};
    AgentCallbacks callbacks;
    callbacks.on_output = [this](std::string line) {
      asio::post(io_, [this, line = std::move(line)] { console_.PrintError(line + "\n"); });
    };
    callbacks.on_exit = [this, rank](std::optional<ExitStatus> status, std::string detail) {
      asio::post(io_, [this, rank, status, detail = std::move(detail)] { OnAgentProcessExit(rank, status, detail); });
    };
    auto handle = starter_.Start(node, command, secret_, std::move(callbacks));
    if (!handle.ok()) {
      agent_exited_[rank] = true;
      Apply(tracker_->OnAgentLost(rank, "could not start the agent: " + handle.status().message(), std::nullopt));
      return;
    }
    handles_[rank] = std::move(*handle);
  }

  Status OnRegister(AgentSession& session, const control::Register& reg) {
    const int nodes = static_cast<int>(plan_->nodes.size());
    auto refuse = [&](std::string why) {
      session.Send(control::Stop{plan_->generation, 0, why});
      session.Close();
      return Status::Ok();
    };
    if (reg.job_id != job_id_) return refuse("agent of job '" + reg.job_id + "' at job '" + job_id_ + "'");
    if (reg.protocol_version != control::kProtocolVersion || reg.version != DSLAUNCH_VERSION) {
      return refuse("agent version " + reg.version + " (protocol " + std::to_string(reg.protocol_version) +
                    ") does not match the launcher's " + DSLAUNCH_VERSION);
    }
    if (reg.node_rank < 0 || reg.node_rank >= nodes) {
      return refuse("node rank " + std::to_string(reg.node_rank) + " is outside 0.." + std::to_string(nodes - 1));
    }
    if (tracker_->agent_registered(reg.node_rank) || tracker_->agent_done(reg.node_rank)) {
      return refuse("node rank " + std::to_string(reg.node_rank) + " already has an agent");
    }
    if (tracker_->state() == JobState::kStopping || tracker_->state() == JobState::kFinished) {
      return refuse("the job is stopping");
    }
    session.node_rank_ = reg.node_rank;
    sessions_[reg.node_rank] = &session;
    heartbeats_[reg.node_rank].OnHeard(Clock::now());
    const NodePlan& node = plan_->nodes[reg.node_rank];
    control::Assignment a;
    a.generation = plan_->generation;
    a.node_rank = node.node_rank;
    a.log_dir = options_.log_dir;
    a.working_dir = options_.working_dir;
    a.grace_period_ms = options_.grace_period.count();
    a.tee = options_.tee;
    a.heartbeat_interval_ms = kHeartbeatInterval.count();
    a.heartbeat_timeout_ms = options_.heartbeat_timeout.count();
    a.env = node.env;  // once per node; each worker's own variables go with it
    for (const auto& w : node.workers) a.workers.push_back({w.rank, w.local_rank, w.argv, w.env});
    session.Send(a);
    Apply(tracker_->OnAgentRegistered(reg.node_rank));
    if (tracker_->state() == JobState::kRunning) registration_timer_.cancel();
    return Status::Ok();
  }

  void OnAgentMessage(int node_rank, const control::Message& msg) {
    heartbeats_[node_rank].OnHeard(Clock::now());
    const std::string host = options_.show_host ? plan_->nodes[node_rank].host : "";
    std::visit(
        [&](const auto& m) {
          using T = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<T, control::Register> || std::is_same_v<T, control::Assignment> ||
                        std::is_same_v<T, control::Stop>) {
            return;  // not sent by agents after registration
          } else {
            if (m.generation != plan_->generation) return;  // a stale peer is never trusted
            if constexpr (std::is_same_v<T, control::Output>) {
              console_.PrintOutput(m, host);
            } else if constexpr (std::is_same_v<T, control::WorkerExited>) {
              Apply(tracker_->OnWorkerExited(node_rank, m));
            } else if constexpr (std::is_same_v<T, control::AgentDone>) {
              Apply(tracker_->OnAgentDone(node_rank));
            } else if constexpr (std::is_same_v<T, control::AgentStopping>) {
              Apply(tracker_->OnAgentStopping(node_rank, m));
            } else if constexpr (std::is_same_v<T, control::AgentFailed>) {
              Apply(tracker_->OnAgentFailed(node_rank, m.reason));
            }
            // WORKER_STARTED and HEARTBEAT: being heard is all they say to the launcher (no
            // decision depends on a worker having started; its exit is what counts).
          }
        },
        msg);
  }

  void OnAgentClosed(int node_rank, const Status& why) {
    if (tracker_->agent_done(node_rank)) return;
    Apply(tracker_->OnAgentLost(node_rank, "control connection closed (" + why.ToString() + ")", std::nullopt));
  }

  void OnAgentProcessExit(int node_rank, std::optional<ExitStatus> status, const std::string& detail) {
    agent_exited_[node_rank] = true;
    if (finishing_) {
      if (AllAgentsExited()) io_.stop();
      return;
    }
    // After registration the control connection tells the story (AGENT_DONE, or a broken
    // connection); before it, the process exit is all there is.
    if (!tracker_->agent_registered(node_rank) && !tracker_->agent_done(node_rank)) {
      std::string what = status ? "agent exited with " + DescribeExitStatus(*status) : "agent ended";
      Apply(tracker_->OnAgentLost(node_rank, what + " before registering (" + detail + ")", status));
    }
  }

  bool AllAgentsExited() const {
    for (size_t i = 0; i < agent_exited_.size(); ++i) {
      if (!agent_exited_[i] && handles_[i] != nullptr) return false;
    }
    return true;
  }

  void ScheduleHeartbeat() {
    heartbeat_timer_.expires_after(kHeartbeatInterval);
    heartbeat_timer_.async_wait([this](boost::system::error_code ec) {
      if (ec || finishing_) return;
      auto now = Clock::now();
      if (CheckerWasSuspended(last_heartbeat_check_, now, options_.heartbeat_timeout)) {
        // The launcher itself was not running (SIGSTOP, a frozen VM): the agents' silence over
        // that time proves nothing. They get a fresh timeout; an agent that gave up on the
        // launcher meanwhile says so with AGENT_STOPPING, which names the real cause.
        console_.PrintError("dslaunch: the launcher was suspended for " +
                            FormatSeconds(std::chrono::duration_cast<std::chrono::milliseconds>(
                                now - last_heartbeat_check_)) +
                            "\n");
        for (auto& h : heartbeats_) h.OnHeard(now);
      }
      last_heartbeat_check_ = now;
      for (size_t node = 0; node < sessions_.size(); ++node) {
        AgentSession* s = sessions_[node];
        if (s == nullptr || tracker_->agent_done(static_cast<int>(node))) continue;
        if (heartbeats_[node].Expired(now)) {
          auto silence = std::chrono::duration<double>(heartbeats_[node].Silence(now)).count();
          s->Close();
          Apply(tracker_->OnAgentLost(static_cast<int>(node),
                                      "no heartbeat for " + std::to_string(static_cast<int>(silence)) + " s",
                                      std::nullopt));
          if (finishing_) return;
          continue;
        }
        s->Send(control::Heartbeat{plan_->generation, ++heartbeat_sequence_});
      }
      ScheduleHeartbeat();
    });
  }

  void WaitForSignal() {
    signals_.async_wait([this](boost::system::error_code ec, int sig) {
      if (ec) return;
      Apply(tracker_->OnSignal(sig));
      WaitForSignal();
    });
  }

  void Apply(Action action) {
    switch (action) {
      case Action::kNone:
        return;
      case Action::kStopAll: {
        for (AgentSession* s : sessions_) {
          if (s != nullptr) s->Send(control::Stop{plan_->generation, options_.grace_period.count(), "job is stopping"});
        }
        registration_timer_.cancel();
        stop_timer_.expires_after(options_.grace_period + kStopReportMargin);
        stop_timer_.async_wait([this](boost::system::error_code ec) {
          if (!ec) Apply(tracker_->OnStopDeadline());
        });
        return;
      }
      case Action::kKillAll: {
        console_.PrintError("dslaunch: interrupted again: killing every worker now (SIGKILL)\n");
        for (AgentSession* s : sessions_) {
          if (s != nullptr) s->Send(control::Stop{plan_->generation, 0, "interrupted again: kill now"});
        }
        // The grace period is over: wait only for the kills to be reported.
        stop_timer_.expires_after(kStopReportMargin);
        stop_timer_.async_wait([this](boost::system::error_code ec) {
          if (!ec) Apply(tracker_->OnStopDeadline());
        });
        return;
      }
      case Action::kFinish:
        Finish();
        return;
    }
  }

  void Finish() {
    finishing_ = true;
    console_.PrintError(FormatSummary(job_id_, *tracker_));
    registration_timer_.cancel();
    heartbeat_timer_.cancel();
    endpoint_->Stop();
    if (AllAgentsExited()) {
      io_.stop();
      return;
    }
    // Agents exit right after AGENT_DONE; one that does not is killed, and if even the kill is not
    // reported (a dead SSH connection), the launcher stops waiting.
    stop_timer_.expires_after(kAgentExitWait);
    stop_timer_.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      for (size_t i = 0; i < handles_.size(); ++i) {
        if (handles_[i] != nullptr && !agent_exited_[i]) handles_[i]->Kill();
      }
      stop_timer_.expires_after(kAgentKillWait);
      stop_timer_.async_wait([this](boost::system::error_code ec2) {
        if (!ec2) io_.stop();
      });
    });
  }

  JobRunnerOptions options_;
  std::string job_id_;
  std::string secret_;
  AgentStarter& starter_;
  Console& console_;
  asio::io_context io_;
  asio::signal_set signals_;
  asio::steady_timer registration_timer_;
  asio::steady_timer stop_timer_;
  asio::steady_timer heartbeat_timer_;
  std::unique_ptr<Endpoint> endpoint_;
  std::shared_ptr<StoreService> store_;
  const LaunchPlan* plan_ = nullptr;
  std::unique_ptr<JobTracker> tracker_;
  std::vector<AgentSession*> sessions_;
  std::vector<std::unique_ptr<AgentHandle>> handles_;  // by node rank
  std::vector<bool> agent_exited_;                      // by node rank
  std::vector<HeartbeatMonitor> heartbeats_;            // by node rank
  uint64_t heartbeat_sequence_ = 0;
  Clock::time_point last_heartbeat_check_ = Clock::now();
  bool finishing_ = false;
};

JobRunner::JobRunner(JobRunnerOptions options, std::string job_id, std::string secret,
                     AgentStarter& starter, Console& console)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(job_id), std::move(secret), starter, console)) {}
JobRunner::~JobRunner() = default;
Status JobRunner::Listen() { return impl_->Listen(); }
uint16_t JobRunner::port() const { return impl_->port(); }
int JobRunner::Run(const LaunchPlan& plan) { return impl_->Run(plan); }

}  // namespace dslaunch::launcher
