#include "launcher/job/job_runner.h"

#include <algorithm>
#include <map>
#include <csignal>
#include <thread>

#include "common/asio.h"
#include "common/check.h"
#include "common/control_messages.h"
#include "common/endpoint/endpoint.h"
#include "common/exit_codes.h"
#include "common/heartbeat.h"
#include "common/message_types.h"
#include "common/store/store_service.h"
#include "common/text.h"
#include "dslaunch/config.h"
#include "launcher/job/agent_proxy_session.h"
#include "launcher/plan/env_contract.h"
#include "launcher/elastic/generation_outcome.h"
#include "launcher/elastic/job_tracker.h"
#include "launcher/node_mode/membership.h"
#include "launcher/job/output_loss.h"
#include "launcher/status/job_status.h"

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
        heartbeat_timer_(io_),
        publish_timer_(io_),
        join_timer_(io_) {
    signals_.add(SIGUSR1);  // a stop for a requeue (docs/exit-codes.md)
  }

  ~Impl() {
    // Handles join their reporting threads; their callbacks post to io_, which outlives them.
    for (auto& c : candidates_) c.handle.reset();
    retired_handles_.clear();
    for (auto& t : probes_) t.join();
  }

  Status Listen() {
    EndpointOptions eo;
    eo.bind_address = options_.bind_address;
    eo.port = options_.port;
    eo.job_id = job_id_;
    eo.secret = secret_;
    eo.max_connections = options_.max_connections;
    DSLAUNCH_ASSIGN_OR_RETURN(endpoint_, Endpoint::Listen(io_, std::move(eo)));
    store_ = StoreService::Attach(io_, *endpoint_);
    endpoint_->SetSessionFactory(PeerRole::kAgent, [this](std::shared_ptr<EndpointConnection> c) {
      return std::make_unique<AgentSession>(*this, std::move(c));
    });
    return Status::Ok();
  }

  uint16_t port() const { return endpoint_->port(); }

  int Run(const JobSpec& spec) {
    // A node that cannot take part (unreachable, no agent of this version): the machinery's
    // failure, not the program's.
    constexpr int kPreflightFailed = kExitInfrastructure;
    spec_ = &spec;
    MakeStatus(spec.plan_options.program);
    policy_ = std::make_unique<ElasticPolicy>(spec.elastic, Hosts(spec.candidates));
    // Every candidate's node plan, for starting and probing its agent (workers are planned per
    // generation).
    const std::vector<NodePlan>& everyone = spec.everyone.nodes;
    DSLAUNCH_CHECK(everyone.size() == spec.candidates.size()) << "a node plan per candidate";
    SetUpCandidates(everyone);
    const PreflightChecks checks{options_.agent_path, options_.agent_version, options_.working_dir};
    // A job that can run without some of its candidates (an elastic range, spares) starts on the
    // ones that pass; the others are failed nodes from the start, re-probed later. Any other job
    // needs every node (one report, nothing started).
    std::vector<int> unreachable;
    if (spec.elastic.min_nodes < static_cast<int>(candidates_.size())) {
      auto failures = starter_.PreflightEach(everyone, checks);
      if (!failures.ok()) {
        console_.PrintError("dslaunch: " + failures.status().message() + "\n");
        return kPreflightFailed;
      }
      for (const PreflightFailure& f : *failures) {
        console_.PrintError("dslaunch: pre-flight failed on node " + std::to_string(f.node_rank) + " (" + f.host +
                            "): " + f.reason + "; it stays out until it answers again\n");
        unreachable.push_back(f.node_rank);
      }
    } else {
      Status preflight = starter_.Preflight(everyone, checks);
      if (!preflight.ok()) {
        console_.PrintError("dslaunch: " + preflight.message() + (preflight.message().ends_with("\n") ? "" : "\n"));
        return kPreflightFailed;
      }
    }

    WaitForSignal();
    if (!Begin(unreachable)) return kPreflightFailed;
    // If the job already finished (no agent could start), Apply() has stopped io_ and run()
    // returns at once.
    io_.run();
    return exit_code_;
  }

  int RunNodeMode(const NodeModeSpec& spec) {
    node_mode_ = true;
    node_spec_ = spec;
    MakeStatus(spec.job.plan_options.program);
    membership_.emplace(spec.min_nodes, spec.max_nodes, spec.join_timeout, spec.last_call_timeout, Clock::now());
    NodePlan own;
    own.node_rank = 0;
    own.host = spec.own_host;
    Status preflight = starter_.Preflight({own}, {options_.agent_path, options_.agent_version, options_.working_dir});
    if (!preflight.ok()) {
      console_.PrintError("dslaunch: " + preflight.message() + (preflight.message().ends_with("\n") ? "" : "\n"));
      return kExitInfrastructure;
    }
    // This node is a member from the start; its agent starts with the job (node 0, the local one).
    auto self = membership_->Join(JoinRequest{spec.own_host, spec.own_slots, std::nullopt, true});
    DSLAUNCH_CHECK(self.ok()) << self.status().ToString();
    const std::string range = spec.min_nodes == spec.max_nodes
                                  ? std::to_string(spec.max_nodes)
                                  : std::to_string(spec.min_nodes) + ":" + std::to_string(spec.max_nodes);
    console_.PrintError("dslaunch: rendezvous of job " + job_id_ + " for " + range + " nodes at port " +
                        std::to_string(port()) + ": waiting up to " + std::to_string(spec.join_timeout.count()) +
                        " s for the other nodes\n");
    WaitForSignal();
    Reconsider();  // a one-node job is complete at once
    io_.run();
    return exit_code_;
  }

 private:
  // The control-plane session of one agent, for the whole job.
  class AgentSession : public SessionHandler {
   public:
    AgentSession(Impl& runner, std::shared_ptr<EndpointConnection> conn)
        : proxy(runner.store_, conn, runner.job_id_), runner_(runner), conn_(std::move(conn)) {}

    Status OnFrame(wire::Frame frame) override {
      // The node's store proxy shares the connection (docs/protocol.md, "Store proxy").
      if (frame.type == msg::kStoreProxied) return proxy.OnProxied(frame.payload);
      DSLAUNCH_ASSIGN_OR_RETURN(control::Message msg, control::Decode(frame));
      proxy.OnReceived(msg);
      if (node_ < 0) {
        auto* reg = std::get_if<control::Register>(&msg);
        if (reg == nullptr) return InvalidArgumentError("agent " + conn_->peer() + ": first message must be register");
        return runner_.OnRegister(*this, *reg);
      }
      runner_.OnAgentMessage(node_, msg);
      return Status::Ok();
    }

    // The session is destroyed soon after; the runner forgets it here (its destructor may run
    // when the runner is already gone, at shutdown).
    void OnClose(const Status& why) override {
      proxy.End();
      if (node_ < 0) {
        if (arrival_ >= 0) runner_.OnJoinedClosed(arrival_);
        return;
      }
      if (runner_.candidates_[node_].session == this) {
        runner_.candidates_[node_].session = nullptr;
        runner_.OnAgentClosed(node_, why);
      }
    }

    void Send(const control::Message& m) {
      proxy.OnSent(m);
      wire::Frame f = control::Encode(m);
      conn_->Send(f.type, std::move(f.payload));
    }
    void Close() { conn_->Close(); }

    int node_ = -1;  // candidate index, once registered
    int arrival_ = -1;  // node mode: the join's arrival id, until the membership is complete
    int64_t agent_pid_ = 0;   // from its REGISTER
    std::string agent_host_;  // from its REGISTER: the node's hostname
    AgentProxySession proxy;  // the node's store proxy, on this connection

   private:
    Impl& runner_;
    std::shared_ptr<EndpointConnection> conn_;
  };

  // One candidate node, for the whole job.
  struct Candidate {
    NodePlan node;  // host, user, slots; node_rank = candidate index
    AgentSession* session = nullptr;
    std::unique_ptr<AgentHandle> handle;
    uint64_t handle_serial = 0;  // which started agent the handle's callbacks speak of
    bool agent_running = false;  // an agent process started by this launcher has not exited
    bool expecting = false;      // an agent was started for it and has not registered yet
    bool probing = false;
    int failed_probes = 0;
    int node_rank = -1;          // in the current generation; -1: not a member
    std::optional<HeartbeatMonitor> heartbeat;
    // Node mode: a rejoined agent waits in its registration for an ASSIGNMENT (the next
    // generation's): it sends no heartbeats, and must be sent none, until then.
    bool awaiting_assignment = false;
    // The registered agent that holds (or last held) this place, and the one it replaced on the
    // same host, which its ASSIGNMENT names for fencing (docs/elastic.md, "Fencing a lost node").
    int64_t agent_pid = 0;
    std::string agent_host;
    int64_t fence_pid = 0;
  };

  // `session` takes candidate c's place. An earlier agent of the place on the same host is the
  // one the new agent fences before it starts any worker.
  void Seat(size_t c, AgentSession& session) {
    Candidate& cand = candidates_[c];
    cand.fence_pid = cand.agent_pid != 0 && cand.agent_host == session.agent_host_ ? cand.agent_pid : 0;
    cand.agent_pid = session.agent_pid_;
    cand.agent_host = session.agent_host_;
    cand.session = &session;
  }

  void SetUpCandidates(const std::vector<NodePlan>& everyone) {
    candidates_.resize(everyone.size());
    for (size_t i = 0; i < candidates_.size(); ++i) {
      // Starting and probing an agent needs the node's host, user and slots, not its workers or
      // their environment: each generation's plan has those (a copy here cost ~0.5 KB per rank).
      NodePlan& node = candidates_[i].node;
      node.node_rank = everyone[i].node_rank;
      node.user = everyone[i].user;
      node.host = everyone[i].host;
      node.slots = everyone[i].slots;
      candidates_[i].heartbeat.emplace(options_.heartbeat_timeout, Clock::now());
    }
  }

  static std::vector<std::string> Hosts(const Resources& r) {
    std::vector<std::string> hosts;
    for (const auto& n : r) hosts.push_back(n.host);
    return hosts;
  }

  // Sets up the candidates of spec_ and starts generation 0; false when the policy refuses to start
  // (too few reachable nodes: it said why).
  bool Begin(const std::vector<int>& unreachable) {
    last_heartbeat_check_ = Clock::now();
    ScheduleHeartbeat();
    Decision first = policy_->Start(unreachable);
    if (first.kind != Decision::Kind::kRun) {
      console_.PrintError(first.line + "\n");
      return false;
    }
    for (int c : unreachable) ScheduleProbe(c);
    if (policy_->restartable()) console_.PrintError(first.line + "\n");
    StartGeneration(first.active, "", 0);
    return true;
  }

  // Node mode: the join phase (docs/node-mode.md, "Rendezvous"). After every arrival, departure
  // and timer, the membership decides: wait (until when), complete, or fail.
  void Reconsider() {
    const JoinVerdict v = membership_->Decide(Clock::now());
    switch (v.kind) {
      case JoinVerdict::Kind::kComplete:
        CompleteMembership();
        return;
      case JoinVerdict::Kind::kFail:
        FailJoin(v.reason, kExitInfrastructure);
        return;
      case JoinVerdict::Kind::kWait:
        join_timer_.expires_at(v.wake_at);
        join_timer_.async_wait([this](boost::system::error_code ec) {
          if (!ec && !membership_complete_ && !finished_) Reconsider();
        });
        return;
    }
  }

  // Tells an agent why it is not admitted (STOP: it exits without retrying) and closes its session.
  Status Refuse(AgentSession& session, const std::string& why) {
    session.Send(control::Stop{plan_.generation, 0, why});
    session.Close();
    return Status::Ok();
  }

  Status OnJoin(AgentSession& session, const control::Register& reg) {
    auto refuse = [&](const std::string& why) {
      console_.PrintError("dslaunch: rendezvous: refused " + reg.host + ": " + why + "\n");
      return Refuse(session, why);
    };
    if (reg.hosts_endpoint) {
      return refuse("node '" + reg.host + "' says it hosts the rendezvous endpoint, which this node does; give every "
                    "node the same --rdzv_endpoint");
    }
    if (finished_) return refuse("the job is over");
    JoinRequest request{reg.host, reg.slots, reg.node_rank >= 0 ? std::optional<int>(reg.node_rank) : std::nullopt,
                        false};
    if (membership_complete_) return OnRejoin(session, request, refuse);
    auto arrival = membership_->Join(request);
    if (!arrival.ok()) return refuse(arrival.status().message());
    session.arrival_ = *arrival;
    joined_[*arrival] = &session;
    if (ShowArrival(membership_->joined(), node_spec_.max_nodes)) {
      console_.PrintError("dslaunch: rendezvous: " + reg.host + " joined (" + std::to_string(membership_->joined()) +
                          " of " + std::to_string(node_spec_.max_nodes) + ")\n");
    }
    Reconsider();
    return Status::Ok();
  }

  // A joined node's connection closed before the membership was complete.
  void OnJoinedClosed(int arrival) {
    if (membership_complete_ || joined_.erase(arrival) == 0) return;
    console_.PrintError("dslaunch: rendezvous: " + membership_->request(arrival).host + " left before the start\n");
    membership_->Leave(arrival);
    Reconsider();
  }

  // A node-mode agent that arrives once the job runs takes the place of a lost member: the one that
  // asked for the same node rank, else the one on the same host (a replaced pod of an Indexed Job
  // has both). The policy then treats it as a failed node that answered again.
  template <typename RefuseFn>
  Status OnRejoin(AgentSession& session, const JoinRequest& request, RefuseFn refuse) {
    for (size_t c = 1; c < candidates_.size(); ++c) {
      Candidate& cand = candidates_[c];
      const bool same = request.node_rank ? asked_rank_[c] == request.node_rank : cand.node.host == request.host;
      if (!same) continue;
      if (cand.session != nullptr || policy_->state(static_cast<int>(c)) != NodeState::kFailed) {
        // Most likely the lost node's generation is still stopping, and the place is free soon: the
        // replacement is told to come back (the infrastructure class: a scheduler replaces the pod
        // and does not count it, docs/exit-codes.md), not that its command line is wrong.
        const std::string why = "the place of node " + std::to_string(c) + " (" + cand.node.host +
                                ") is still held by a live member of the job; try again later";
        console_.PrintError("dslaunch: rendezvous: not letting " + request.host + " in: " + why + "\n");
        session.Send(control::Release{0, kExitInfrastructure, why});
        session.Close();
        return Status::Ok();
      }
      session.node_ = static_cast<int>(c);
      Seat(c, session);
      cand.awaiting_assignment = true;
      cand.heartbeat->OnHeard(Clock::now());
      console_.PrintError("dslaunch: rendezvous: " + request.host + " rejoined in the place of node " +
                          std::to_string(c) + "\n");
      std::optional<Decision> d = policy_->OnNodeReturned(static_cast<int>(c));
      if (d && d->kind == Decision::Kind::kRescale) {
        console_.PrintError(d->line + "\n");
        Apply(tracker_->OnRescale(d->reason));
      }
      return Status::Ok();
    }
    return refuse("node '" + request.host + "' is not one of this job's nodes; once the job runs, a node can only " +
                  "rejoin in the place of a lost one (same --node_rank, or same host)");
  }

  void CompleteMembership() {
    membership_complete_ = true;
    join_timer_.cancel();
    const std::vector<int> order = membership_->NodeRankOrder();
    Members members = membership_->InRankOrder();
    const Resources& resources = members.resources;
    asked_rank_ = std::move(members.asked_ranks);
    node_job_ = node_spec_.job;
    node_job_.candidates = resources;
    auto plan = PlanLaunch(resources, node_job_.plan_options);
    if (!plan.ok()) {
      FailJoin(plan.status().message(), kExitUsage);
      return;
    }
    node_job_.everyone = std::move(*plan);
    const int joined = static_cast<int>(order.size());
    // The other nodes' workers are known now: a job that does not fit the descriptor limit stops
    // here, before any worker starts, not by refusing connections mid-rendezvous.
    ConnectionDemand demand = options_.connections;
    demand.ranks = node_job_.everyone.world_size;
    demand.nodes = joined;
    auto budget = FitConnections(demand, options_.descriptor_limit);
    if (!budget.ok()) {
      FailJoin(budget.status().message(), kExitUsage);
      return;
    }
    endpoint_->SetMaxConnections(
        std::max(options_.max_connections, static_cast<size_t>(budget->max_connections)));
    node_job_.elastic.min_nodes = std::min(node_spec_.min_nodes, joined);
    node_job_.elastic.max_nodes = joined;
    console_.PrintError("dslaunch: rendezvous complete: " + std::to_string(joined) + " nodes, " +
                        std::to_string(node_job_.everyone.world_size) + " workers: " + members.line + "\n");
    spec_ = &node_job_;
    policy_ = std::make_unique<ElasticPolicy>(node_job_.elastic, Hosts(node_job_.candidates));
    SetUpCandidates(node_job_.everyone.nodes);
    // Generation 0's plan on every node has checked the options and made the candidates; each
    // generation plans its own workers (StartGeneration), so these are not kept (~1 KB per rank).
    for (NodePlan& n : node_job_.everyone.nodes) {
      std::vector<WorkerPlan>().swap(n.workers);
      n.env.clear();
    }
    for (size_t c = 0; c < order.size(); ++c) {
      auto it = joined_.find(order[c]);
      if (it == joined_.end()) continue;  // node 0: this node's agent starts with generation 0
      it->second->node_ = static_cast<int>(c);
      it->second->arrival_ = -1;
      Seat(c, *it->second);
      candidates_[c].heartbeat->OnHeard(Clock::now());
    }
    joined_.clear();
    const bool started = Begin({});  // every member is reachable: the policy starts on all of them
    DSLAUNCH_CHECK(started) << "node mode: generation 0 refused";
  }

  // The join phase ends without a job: every waiting node is told the exit code.
  void FailJoin(const std::string& why, int code) {
    console_.PrintError("dslaunch: rendezvous failed: " + why + "\n");
    finished_ = true;
    exit_code_ = code;
    join_timer_.cancel();
    for (auto& [arrival, session] : joined_) {
      session->Send(control::Release{0, code});
      session->Close();
    }
    joined_.clear();
    endpoint_->Stop();
    io_.stop();
  }

  // Starts generation policy_->generation() on `active` (candidate indices, node-rank order).
  void StartGeneration(const std::vector<int>& active, const std::string& reason, int64_t fault_time_ms) {
    // plan_options.generation: the first generation's number (a requeued Slurm job's restart count).
    const int generation = spec_->plan_options.generation + policy_->generation();
    Resources resources;
    for (int c : active) resources.push_back(spec_->candidates[c]);
    PlanOptions po = spec_->plan_options;
    po.generation = generation;
    po.max_restarts = spec_->elastic.max_restarts;
    po.restart_reason = reason.empty() ? spec_->plan_options.restart_reason : reason;
    po.fault_time_ms = fault_time_ms;
    auto plan = PlanLaunch(resources, po);
    DSLAUNCH_CHECK(plan.ok()) << "generation " << generation << ": " << plan.status().ToString();
    plan_ = std::move(*plan);
    tracker_ = std::make_unique<JobTracker>(plan_);
    fault_time_ms_ = 0;
    workers_started_ = 0;
    options_.events.Record(generation, "generation_start", reason);
    if (status_) {
      status_->OnGeneration(plan_);
      Publish();
    }
    members_ = active;
    for (auto& c : candidates_) c.node_rank = -1;
    for (size_t r = 0; r < active.size(); ++r) candidates_[active[r]].node_rank = static_cast<int>(r);
    if (generation > 0) {
      // Workers of earlier generations (stopped late, partitioned) can never touch this one's
      // keys: their store connections are closed and refused from now on, and their keys go
      // (docs/protocol.md, "Generations").
      endpoint_->BeginGeneration(generation);
      for (auto& c : candidates_) {
        if (c.session != nullptr) c.session->proxy.End();  // and the agents' store proxies
      }
      store_->DeleteGenerationsBefore(generation);
    }
    // Agents of the previous generation that are not members of this one are released.
    for (size_t i = 0; i < candidates_.size(); ++i) {
      Candidate& c = candidates_[i];
      if (c.node_rank < 0 && c.session != nullptr) {
        c.session->Send(control::Release{generation});
        c.session->Close();
      }
    }
    bool waiting = false;
    for (size_t r = 0; r < active.size(); ++r) {
      Candidate& c = candidates_[active[r]];
      if (c.session != nullptr) {
        SendAssignment(*c.session, r);
        Apply(tracker_->OnAgentRegistered(static_cast<int>(r)));
      } else {
        waiting = true;
        if (!c.expecting) StartAgent(active[r]);
      }
      if (finished_) return;
    }
    if (waiting && tracker_->state() == JobState::kStarting) {
      registration_timer_.expires_after(kRegistrationTimeout);
      registration_timer_.async_wait([this, generation](boost::system::error_code ec) {
        if (ec || generation != plan_.generation || tracker_->state() != JobState::kStarting) return;
        Apply(tracker_->OnStartupFailed("not every agent registered within " +
                                        std::to_string(kRegistrationTimeout.count()) + " s"));
      });
    }
  }

  void StartAgent(int candidate) {
    Candidate& c = candidates_[candidate];
    if (c.handle != nullptr) {
      // The previous agent of this node is gone or lost; its handle still reports its exit.
      if (c.agent_running) c.handle->Kill();
      retired_handles_.push_back(std::move(c.handle));
    }
    const uint64_t serial = ++agent_serial_;
    AgentCommand command{options_.agent_path, options_.advertise_host, port(), job_id_, candidate, std::nullopt};
    AgentCallbacks callbacks;
    callbacks.on_output = [this](std::string line) {
      asio::post(io_, [this, line = std::move(line)] { console_.PrintError(line + "\n"); });
    };
    callbacks.on_exit = [this, candidate, serial](std::optional<ExitStatus> status, std::string detail) {
      asio::post(io_, [this, candidate, serial, status, detail = std::move(detail)] {
        OnAgentProcessExit(candidate, serial, status, detail);
      });
    };
    c.expecting = true;
    auto handle = starter_.Start(c.node, command, secret_, std::move(callbacks));
    if (!handle.ok()) {
      c.expecting = false;
      if (c.node_rank >= 0) {
        Apply(tracker_->OnAgentLost(c.node_rank, "could not start the agent: " + handle.status().message(), std::nullopt));
      }
      return;
    }
    c.handle = std::move(*handle);
    c.handle_serial = serial;
    c.agent_running = true;
    ++agents_started_;
  }

  void SendAssignment(AgentSession& session, size_t node_rank) {
    const NodePlan& node = plan_.nodes[node_rank];
    control::Assignment a;
    a.generation = plan_.generation;
    a.node_rank = node.node_rank;
    a.log_dir = options_.log_dir;
    a.working_dir = options_.working_dir;
    a.grace_period_ms = options_.grace_period.count();
    a.tee = options_.tee;
    a.heartbeat_interval_ms = options_.heartbeat_interval.count();
    a.heartbeat_timeout_ms = options_.heartbeat_timeout.count();
    a.env = node.env;  // once per node; each worker's own variables go with it
    for (const auto& w : node.workers) a.workers.push_back({w.rank, w.local_rank, w.argv, WorkerOwnEnvironment(w)});
    a.restartable = policy_->restartable();
    a.watchdog_timeout_ms = plan_.watchdog_timeout_ms;
    a.await_release = node_mode_;
    a.store_proxy = options_.store_proxy;
    a.bind_cores_to_rank = plan_.bind_cores_to_rank;
    a.bind_core_list = plan_.bind_core_list;
    if (session.node_ >= 0) a.fence_agent_pid = candidates_[session.node_].fence_pid;
    session.Send(a);
    if (session.node_ >= 0) candidates_[session.node_].awaiting_assignment = false;
  }

  Status OnRegister(AgentSession& session, const control::Register& reg) {
    const int nodes = static_cast<int>(candidates_.size());
    session.agent_pid_ = reg.pid;
    session.agent_host_ = reg.host;
    auto refuse = [&](const std::string& why) { return Refuse(session, why); };
    if (reg.job_id != job_id_) return refuse("agent of job '" + reg.job_id + "' at job '" + job_id_ + "'");
    if (reg.protocol_version != control::kProtocolVersion || reg.version != DSLAUNCH_VERSION) {
      return refuse("agent version " + reg.version + " (protocol " + std::to_string(reg.protocol_version) +
                    ") does not match the launcher's " + DSLAUNCH_VERSION);
    }
    if (node_mode_ && reg.slots > 0) return OnJoin(session, reg);
    if (tracker_ == nullptr) return refuse("the job has not started: its nodes are still joining");
    if (reg.node_rank < 0 || reg.node_rank >= nodes) {
      return refuse("node " + std::to_string(reg.node_rank) + " is outside 0.." + std::to_string(nodes - 1));
    }
    Candidate& c = candidates_[reg.node_rank];
    if (c.session != nullptr) return refuse("node " + std::to_string(reg.node_rank) + " already has an agent");
    if (finished_ || tracker_->state() == JobState::kStopping || tracker_->state() == JobState::kFinished) {
      return refuse("the job is stopping");
    }
    // An agent is admitted only where this launcher is waiting for one: a stale agent of an
    // earlier generation (a node that was lost and came back) is never trusted.
    if (!c.expecting || c.node_rank < 0) {
      return refuse("node " + std::to_string(reg.node_rank) + " has no agent expected in generation " +
                    std::to_string(plan_.generation));
    }
    c.expecting = false;
    session.node_ = reg.node_rank;
    Seat(static_cast<size_t>(reg.node_rank), session);
    c.heartbeat->OnHeard(Clock::now());
    SendAssignment(session, static_cast<size_t>(c.node_rank));
    Apply(tracker_->OnAgentRegistered(c.node_rank));
    if (tracker_->state() == JobState::kRunning) registration_timer_.cancel();
    return Status::Ok();
  }

  void OnAgentMessage(int candidate, const control::Message& msg) {
    Candidate& c = candidates_[candidate];
    c.heartbeat->OnHeard(Clock::now());
    const int node_rank = c.node_rank;
    if (node_rank < 0 || finished_) return;  // not in this generation: being heard is all it says
    const std::string host = options_.show_host ? c.node.host : "";
    if (status_) FeedStatus(node_rank, msg);
    std::visit(
        [&](const auto& m) {
          using T = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<T, control::Register> || std::is_same_v<T, control::Assignment> ||
                        std::is_same_v<T, control::Stop> || std::is_same_v<T, control::Release>) {
            return;  // not sent by agents after registration
          } else {
            if (m.generation != plan_.generation) return;  // a stale peer is never trusted
            if constexpr (std::is_same_v<T, control::Output>) {
              console_.PrintOutput(m, host);
            } else if constexpr (std::is_same_v<T, control::WorkerStarted>) {
              if (++workers_started_ == plan_.world_size) options_.events.Record(plan_.generation, "workers_started");
            } else if constexpr (std::is_same_v<T, control::WorkerExited>) {
              Apply(tracker_->OnWorkerExited(node_rank, m));
            } else if constexpr (std::is_same_v<T, control::WorkerStalled>) {
              Apply(tracker_->OnWorkerStalled(node_rank, m));
            } else if constexpr (std::is_same_v<T, control::AgentDone>) {
              Apply(tracker_->OnAgentDone(node_rank));
            } else if constexpr (std::is_same_v<T, control::AgentStopping>) {
              leaving_.push_back(candidate);  // it exits after this generation
              Apply(tracker_->OnAgentStopping(node_rank, m));
            } else if constexpr (std::is_same_v<T, control::AgentFailed>) {
              Apply(tracker_->OnAgentFailed(node_rank, m.reason));
            } else if constexpr (std::is_same_v<T, control::OutputLost>) {
              if (std::optional<std::string> line = output_loss_.Add(m, host)) {
                console_.PrintError(*line);
                options_.events.Record(plan_.generation, "output_lost", m.path + ": " + m.error);
              }
            }
            // WORKER_STARTED and HEARTBEAT: being heard is all they say to the launcher (no
            // decision depends on a worker having started; its exit is what counts).
          }
        },
        msg);
  }

  // The status board (options_.board): the view is kept from the events handled here.
  // The launcher's view of the job (launcher/status/job_status.h): kept for the status board, and
  // for the straggler rule, which runs on it even when nothing reads a board.
  void MakeStatus(const ProgramSpec& program) {
    if (!options_.board && options_.stragglers.factor <= 0) return;
    std::vector<std::string> command{program.program};
    command.insert(command.end(), program.args.begin(), program.args.end());
    status_.emplace(job_id_, std::move(command), UnixMillis(), options_.stragglers);
  }

  void FeedStatus(int node_rank, const control::Message& msg) {
    if (const auto* output = std::get_if<control::Output>(&msg)) {
      if (output->generation != plan_.generation || !options_.board) return;
      for (const std::string& line : output->lines) {
        if (!control::IsTransientLine(line)) options_.board->AppendLog(output->rank, line);
      }
      return;  // output changes no view
    }
    if (auto straggler = status_->OnAgentMessage(node_rank, plan_.generation, msg, UnixMillis())) {
      const std::string line = DescribeStraggler(*straggler);
      console_.PrintError("dslaunch: " + line + "\n");
      options_.events.Record(plan_.generation, "straggler", line);
    }
    Publish();  // a heartbeat's time is news too
  }

  // Publishes the view now when the job's state, generation or end changed, or the last publish
  // is kBoardPublishInterval old; otherwise once that time is up (kBoardPublishInterval).
  void Publish() {
    // Without a board (no status page) nobody reads a view: copying every rank's view each
    // kBoardPublishInterval would cost ~250 B per rank twice over, and the CPU of the copy.
    if (!options_.board) return;
    const auto now = Clock::now();
    const std::string state = tracker_ != nullptr ? std::string(JobStateName(tracker_->state())) : "";
    const bool changed = state != published_state_ || plan_.generation != published_generation_ || finished_;
    if (!changed && now - last_publish_ < kBoardPublishInterval) {
      if (publish_pending_) return;
      publish_pending_ = true;
      publish_timer_.expires_at(last_publish_ + kBoardPublishInterval);
      publish_timer_.async_wait([this](boost::system::error_code ec) {
        if (ec) return;
        publish_pending_ = false;
        Publish();
      });
      return;
    }
    published_state_ = state;
    published_generation_ = plan_.generation;
    last_publish_ = now;
    // The tracker's state and root cause are read when a view goes out, not on every message.
    if (tracker_ != nullptr && !finished_) {
      status_->OnJobState(tracker_->state());
      if (const auto& cause = tracker_->root_cause()) status_->OnRootCause(DescribeRootCause(*cause));
    }
    status_->SetStoreBytesSent(static_cast<int64_t>(endpoint_->bytes_sent()));
    options_.board->Publish(status_->View(UnixMillis()));
  }

  void OnAgentClosed(int candidate, const Status& why) {
    const int node_rank = candidates_[candidate].node_rank;
    if (status_ && node_rank >= 0 && !finished_) status_->OnAgentLost(node_rank);
    if (finished_ || node_rank < 0 || tracker_->agent_done(node_rank)) return;
    Apply(tracker_->OnAgentLost(node_rank, "control connection closed (" + why.ToString() + ")", std::nullopt));
  }

  void OnAgentProcessExit(int candidate, uint64_t serial, std::optional<ExitStatus> status,
                          const std::string& detail) {
    if (serial == candidates_[candidate].handle_serial) candidates_[candidate].agent_running = false;
    ++agents_exited_;
    if (finished_) {
      if (AllAgentsExited()) io_.stop();
      return;
    }
    Candidate& c = candidates_[candidate];
    // After registration the control connection tells the story (AGENT_DONE, or a broken
    // connection); before it, the process exit is all there is.
    if (serial == c.handle_serial && c.expecting) {
      c.expecting = false;
      if (c.node_rank >= 0) {
        std::string what = status ? "agent exited with " + DescribeExitStatus(*status) : "agent ended";
        Apply(tracker_->OnAgentLost(c.node_rank, what + " before registering (" + detail + ")", status));
      }
    }
  }

  bool AllAgentsExited() const { return agents_exited_ >= agents_started_; }

  void ScheduleHeartbeat() {
    heartbeat_timer_.expires_after(options_.heartbeat_interval);
    heartbeat_timer_.async_wait([this](boost::system::error_code ec) {
      if (ec || finished_) return;
      auto now = Clock::now();
      if (CheckerWasSuspended(last_heartbeat_check_, now, options_.heartbeat_timeout)) {
        // The launcher itself was not running (SIGSTOP, a frozen VM): the agents' silence over
        // that time proves nothing. They get a fresh timeout; an agent that gave up on the
        // launcher meanwhile says so with AGENT_STOPPING, which names the real cause.
        console_.PrintError("dslaunch: the launcher was suspended for " +
                            FormatSeconds(std::chrono::duration_cast<std::chrono::milliseconds>(
                                now - last_heartbeat_check_)) +
                            "\n");
        for (auto& c : candidates_) c.heartbeat->OnHeard(now);
      }
      last_heartbeat_check_ = now;
      for (size_t i = 0; i < candidates_.size(); ++i) {
        Candidate& c = candidates_[i];
        AgentSession* s = c.session;
        // An agent whose workers are done exits, unless it waits for the next ASSIGNMENT (a
        // restartable job) or for RELEASE (node mode): those still watch for heartbeats.
        if (s == nullptr || c.awaiting_assignment ||
            (c.node_rank >= 0 && tracker_->agent_done(c.node_rank) && !policy_->restartable() && !node_mode_)) {
          continue;
        }
        if (c.heartbeat->Expired(now)) {
          auto silence = std::chrono::duration<double>(c.heartbeat->Silence(now)).count();
          c.session = nullptr;
          s->Close();
          if (c.node_rank >= 0) {
            Apply(tracker_->OnAgentLost(c.node_rank,
                                        "no heartbeat for " + FormatSeconds(std::chrono::milliseconds(
                                                                  static_cast<int64_t>(silence * 1000))),
                                        std::nullopt));
          }
          if (finished_) return;
          continue;
        }
        s->Send(control::Heartbeat{plan_.generation, ++heartbeat_sequence_});
      }
      ScheduleHeartbeat();
    });
  }

  void WaitForSignal() {
    signals_.async_wait([this](boost::system::error_code ec, int sig) {
      if (ec) return;
      if (tracker_ == nullptr) {  // node mode, still joining
        FailJoin("the launcher received " + SignalName(sig),
                 sig == SIGUSR1 ? kExitRequeue : ShellExitCode(ExitStatus::Signaled(sig)));
        return;
      }
      Apply(tracker_->OnSignal(sig));
      WaitForSignal();
    });
  }

  void SendStop(int64_t grace_ms, const std::string& reason) {
    for (int c : members_) {
      if (candidates_[c].session != nullptr) candidates_[c].session->Send(control::Stop{plan_.generation, grace_ms, reason});
    }
  }

  void Apply(Action action) {
    if (status_) Publish();
    switch (action) {
      case Action::kNone:
        return;
      case Action::kStopAll: {
        if (fault_time_ms_ == 0) {
          fault_time_ms_ = UnixMillis();
          const auto& cause = tracker_->root_cause();
          options_.events.Record(plan_.generation, "fault", cause ? DescribeRootCause(*cause) : "");
        }
        const std::chrono::milliseconds grace = StopGrace();
        SendStop(grace.count(), "job is stopping");
        registration_timer_.cancel();
        const int generation = plan_.generation;
        stop_timer_.expires_after(grace + kStopReportMargin);
        stop_timer_.async_wait([this, generation](boost::system::error_code ec) {
          if (!ec && generation == plan_.generation && !finished_) Apply(tracker_->OnStopDeadline());
        });
        return;
      }
      case Action::kKillAll: {
        console_.PrintError("dslaunch: interrupted again: killing every worker now (SIGKILL)\n");
        SendStop(0, "interrupted again: kill now");
        // The grace period is over: wait only for the kills to be reported.
        const int generation = plan_.generation;
        stop_timer_.expires_after(kStopReportMargin);
        stop_timer_.async_wait([this, generation](boost::system::error_code ec) {
          if (!ec && generation == plan_.generation && !finished_) Apply(tracker_->OnStopDeadline());
        });
        return;
      }
      case Action::kFinish:
        EndGeneration();
        return;
    }
  }

  // The grace period of this generation's stop (kFailureStopGrace).
  std::chrono::milliseconds StopGrace() const {
    const auto& cause = tracker_->root_cause();
    const bool healthy_stop =
        !cause || cause->kind == RootCause::Kind::kSignal || cause->kind == RootCause::Kind::kRescale;
    if (healthy_stop || !policy_->restartable()) return options_.grace_period;
    return FailureStopGrace(options_.grace_period);
  }

  static int64_t UnixMillis() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  // The generation's tracker finished: every member reported done, was lost, or missed the stop
  // deadline. The policy decides what follows.
  void EndGeneration() {
    stop_timer_.cancel();
    registration_timer_.cancel();
    // A member that was lost, missed the stop deadline, or leaves on its own (it said so with
    // AGENT_STOPPING) cannot take part in the next generation.
    std::vector<int> gone;
    for (int node_rank : tracker_->unfinished_nodes()) gone.push_back(members_[node_rank]);
    for (int node_rank : tracker_->lost_nodes()) gone.push_back(members_[node_rank]);
    for (int c : gone) DropAgent(c, /*kill=*/true);
    for (int c : leaving_) {
      gone.push_back(c);
      DropAgent(c, /*kill=*/false);  // it exits by itself, after its final sweep
    }
    leaving_.clear();
    std::sort(gone.begin(), gone.end());
    gone.erase(std::unique(gone.begin(), gone.end()), gone.end());
    const GenerationOutcome outcome = OutcomeOf(*tracker_, members_, gone);
    last_code_ = tracker_->ExitCode();
    options_.events.Record(plan_.generation, "generation_end",
                           outcome.kind == GenerationOutcome::Kind::kSucceeded ? "succeeded" : outcome.description);
    Decision d = policy_->OnGenerationEnded(outcome);
    options_.events.Record(plan_.generation, "decision", d.line);
    if (d.kind == Decision::Kind::kRun) {
      console_.PrintError(d.line + "\n");
      for (int c : gone) ScheduleProbe(c);
      StartGeneration(d.active, outcome.description.empty() ? d.line : outcome.description, fault_time_ms_);
      return;
    }
    Finish(d);
  }

  // Forgets a candidate's agent: its session is closed, and with `kill` its process killed.
  void DropAgent(int candidate, bool kill) {
    Candidate& c = candidates_[candidate];
    c.expecting = false;
    if (c.session != nullptr) {
      AgentSession* s = c.session;
      c.session = nullptr;
      s->Close();
    }
    if (kill && c.handle != nullptr && c.agent_running) c.handle->Kill();
  }

  // Re-probes a failed candidate after the policy's backoff; one that answers is offered to the
  // policy, which may scale the job up (docs/elastic.md, "Re-admission").
  void ScheduleProbe(int candidate) {
    Candidate& c = candidates_[candidate];
    if (!spec_->probe_starter || c.probing || finished_) return;
    c.probing = true;
    auto timer = std::make_shared<asio::steady_timer>(io_, ReprobeDelay(c.failed_probes));
    timer->async_wait([this, candidate, timer](boost::system::error_code ec) {
      if (ec || finished_) return;
      NodePlan node = candidates_[candidate].node;
      PreflightChecks checks{options_.agent_path, options_.agent_version, options_.working_dir};
      probes_.emplace_back([this, candidate, node = std::move(node), checks] {
        std::unique_ptr<AgentStarter> prober = spec_->probe_starter();
        Status s = prober->Preflight({node}, checks);
        asio::post(io_, [this, candidate, ok = s.ok()] { OnProbed(candidate, ok); });
      });
    });
  }

  void OnProbed(int candidate, bool ok) {
    Candidate& c = candidates_[candidate];
    c.probing = false;
    if (finished_ || policy_->state(candidate) != NodeState::kFailed) return;
    if (!ok) {
      ++c.failed_probes;
      policy_->OnNodeUnreachable(candidate);
      ScheduleProbe(candidate);
      return;
    }
    c.failed_probes = 0;
    std::optional<Decision> d = policy_->OnNodeReturned(candidate);
    if (!d || d->kind != Decision::Kind::kRescale) return;
    console_.PrintError(d->line + "\n");
    Apply(tracker_->OnRescale(d->reason));
  }

  void Finish(const Decision& d) {
    finished_ = true;
    exit_code_ = last_code_;
    if (status_) {
      status_->OnFinished(exit_code_);
      Publish();
      publish_timer_.cancel();
    }
    if (policy_->generation() > 0 || d.kind == Decision::Kind::kStopRepeated) {
      console_.PrintError(FormatGenerationHistory(*policy_));
      if (!d.line.empty()) console_.PrintError(d.line + "\n");
    }
    console_.PrintError(FormatSummary(job_id_, *tracker_));
    console_.PrintError(output_loss_.Summary(job_id_));
    registration_timer_.cancel();
    heartbeat_timer_.cancel();
    for (auto& c : candidates_) {
      // Node mode: every node's process ends with the job's code (control::Assignment::await_release).
      if (c.session == nullptr) continue;
      c.session->Send(control::Release{plan_.generation, node_mode_ ? exit_code_ : -1});
      // Flushed before the endpoint stops: aborted at once, a RELEASE still queued behind another
      // frame was lost, and the agent waited for its heartbeat timeout (found by sim_scale).
      c.session->Close();
    }
    endpoint_->Stop();
    if (AllAgentsExited()) {
      io_.stop();
      return;
    }
    // Agents exit right after AGENT_DONE (or RELEASE); one that does not is killed, and if even
    // the kill is not reported (a dead SSH connection), the launcher stops waiting.
    stop_timer_.expires_after(kAgentExitWait);
    stop_timer_.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      for (auto& c : candidates_) {
        if (c.handle != nullptr && c.agent_running) c.handle->Kill();
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
  asio::steady_timer publish_timer_;
  std::unique_ptr<Endpoint> endpoint_;
  std::shared_ptr<StoreService> store_;
  const JobSpec* spec_ = nullptr;
  std::unique_ptr<ElasticPolicy> policy_;
  std::vector<Candidate> candidates_;
  std::vector<std::unique_ptr<AgentHandle>> retired_handles_;  // agents replaced by a later one
  std::vector<std::thread> probes_;
  // The current generation.
  LaunchPlan plan_;
  std::unique_ptr<JobTracker> tracker_;
  std::vector<int> members_;  // candidate index by node rank
  std::vector<int> leaving_;  // members whose agent said it stops on its own (AGENT_STOPPING)
  int64_t fault_time_ms_ = 0;  // when this generation's first failure was seen (Unix ms)
  int workers_started_ = 0;    // WORKER_STARTED messages of this generation
  OutputLossLog output_loss_;  // log files that lost output, every generation's
  uint64_t agent_serial_ = 0;    // agents whose start was attempted
  uint64_t agents_started_ = 0;  // of them, started
  uint64_t agents_exited_ = 0;   // of those, exits reported
  uint64_t heartbeat_sequence_ = 0;
  Clock::time_point last_heartbeat_check_ = Clock::now();
  bool finished_ = false;
  int last_code_ = 0;
  // Node mode (RunNodeMode).
  bool node_mode_ = false;
  NodeModeSpec node_spec_;
  JobSpec node_job_;  // made when the membership is complete; spec_ points to it
  std::optional<NodeMembership> membership_;
  bool membership_complete_ = false;
  asio::steady_timer join_timer_;
  std::map<int, AgentSession*> joined_;        // arrival id -> session, until the membership is complete
  std::vector<std::optional<int>> asked_rank_;  // candidate -> the node rank its node asked for
  int exit_code_ = kExitInfrastructure;
  // The status board's view (options_.board set), and what was published last.
  std::optional<JobStatus> status_;
  std::string published_state_;
  int published_generation_ = -1;
  Clock::time_point last_publish_{};
  bool publish_pending_ = false;
};

JobRunner::JobRunner(JobRunnerOptions options, std::string job_id, std::string secret,
                     AgentStarter& starter, Console& console)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(job_id), std::move(secret), starter, console)) {}
JobRunner::~JobRunner() = default;
Status JobRunner::Listen() { return impl_->Listen(); }
uint16_t JobRunner::port() const { return impl_->port(); }
int JobRunner::Run(const JobSpec& spec) { return impl_->Run(spec); }
int JobRunner::RunNodeMode(const NodeModeSpec& spec) { return impl_->RunNodeMode(spec); }

}  // namespace dslaunch::launcher
