// The job's lifecycle: JobRunner::Impl (job_runner_impl.h), the story of its generations. The
// parts it uses (the agent fleet, the join phase, the status feed, the loop) are in their own files.
#include "launcher/job/job_runner.h"

#include <algorithm>
#include <csignal>

#include "common/check.h"
#include "common/exit_codes.h"
#include "common/store/store_service.h"
#include "launcher/elastic/generation_outcome.h"
#include "launcher/job/job_runner_impl.h"
#include "launcher/plan/env_contract.h"

namespace dslaunch::launcher {
namespace {

// A node that cannot take part (unreachable, no agent of this version): the machinery's
// failure, not the program's.
constexpr int kPreflightFailed = kExitInfrastructure;

std::vector<std::string> Hosts(const Resources& r) {
  std::vector<std::string> hosts;
  for (const auto& n : r) hosts.push_back(n.host);
  return hosts;
}

// What the fleet needs of the runner's options.
AgentFleet::Options FleetOptions(const JobRunnerOptions& o, const std::string& job_id, const std::string& secret) {
  return {.agent_path = o.agent_path,
          .agent_version = o.agent_version,
          .working_dir = o.working_dir,
          .advertise_host = o.advertise_host,
          .job_id = job_id,
          .secret = secret,
          .heartbeat_timeout = o.heartbeat_timeout,
          .heartbeat_interval = o.heartbeat_interval};
}

}  // namespace

JobRunner::Impl::Impl(JobRunnerOptions options, std::string job_id, std::string secret, AgentStarter& starter,
                      Console& console)
    : options_(std::move(options)),
      job_id_(std::move(job_id)),
      secret_(std::move(secret)),
      starter_(starter),
      console_(console),
      loop_({SIGINT, SIGTERM, SIGHUP, SIGUSR1}),  // SIGUSR1: a stop for a requeue (docs/exit-codes.md)
      feed_(options_.board, options_.stragglers, loop_, console_, options_.events, *this),
      fleet_(FleetOptions(options_, job_id_, secret_), starter_, console_, loop_, *this),
      registration_timer_(loop_.NewTimer()),
      stop_timer_(loop_.NewTimer()) {}

JobRunner::Impl::~Impl() = default;

Status JobRunner::Impl::Listen() {
  EndpointOptions eo;
  eo.bind_address = options_.bind_address;
  eo.port = options_.port;
  eo.job_id = job_id_;
  eo.secret = secret_;
  eo.max_connections = options_.max_connections;
  DSLAUNCH_ASSIGN_OR_RETURN(endpoint_, Endpoint::Listen(loop_.io(), std::move(eo)));
  store_ = StoreService::Attach(loop_.io(), *endpoint_);
  fleet_.SetEndpointPort(endpoint_->port());
  endpoint_->SetSessionFactory(PeerRole::kAgent, [this](std::shared_ptr<EndpointConnection> c) {
    return fleet_.Accept(std::move(c), store_);
  });
  return Status::Ok();
}

int JobRunner::Impl::Run(const JobSpec& spec) {
  spec_ = &spec;
  feed_.Open(job_id_, spec.plan_options.program);
  policy_ = std::make_unique<ElasticPolicy>(spec.elastic, Hosts(spec.candidates));
  // Every candidate's node plan, for starting and probing its agent (workers are planned per
  // generation).
  DSLAUNCH_CHECK(spec.everyone.nodes.size() == spec.candidates.size()) << "a node plan per candidate";
  fleet_.SetUp(spec.everyone.nodes, spec.probe_starter);
  std::optional<std::vector<int>> unreachable = Preflight(spec);
  if (!unreachable) return kPreflightFailed;
  WaitForSignal();
  if (!Begin(*unreachable)) return kPreflightFailed;
  // If the job already finished (no agent could start), Finish has stopped the loop and Run()
  // returns at once.
  loop_.Run();
  return exit_code_;
}

// Pre-flight on every candidate. A job that can run without some of its candidates (an elastic
// range, spares) starts on the ones that pass: the others (returned) are failed nodes from the
// start, re-probed later. Any other job needs every node. Nullopt: one report was printed and
// nothing starts.
std::optional<std::vector<int>> JobRunner::Impl::Preflight(const JobSpec& spec) {
  const std::vector<NodePlan>& everyone = spec.everyone.nodes;
  const PreflightChecks checks{options_.agent_path, options_.agent_version, options_.working_dir};
  std::vector<int> unreachable;
  if (spec.elastic.min_nodes < static_cast<int>(everyone.size())) {
    auto failures = starter_.PreflightEach(everyone, checks);
    if (!failures.ok()) {
      console_.PrintError("dslaunch: " + failures.status().message() + "\n");
      return std::nullopt;
    }
    for (const PreflightFailure& f : *failures) {
      console_.PrintError("dslaunch: pre-flight failed on node " + std::to_string(f.node_rank) + " (" + f.host +
                          "): " + f.reason + "; it stays out until it answers again\n");
      unreachable.push_back(f.node_rank);
    }
    return unreachable;
  }
  Status preflight = starter_.Preflight(everyone, checks);
  if (!preflight.ok()) {
    console_.PrintError("dslaunch: " + preflight.message() + (preflight.message().ends_with("\n") ? "" : "\n"));
    return std::nullopt;
  }
  return unreachable;
}

int JobRunner::Impl::RunNodeMode(const NodeModeSpec& spec) {
  node_mode_ = true;
  feed_.Open(job_id_, spec.job.plan_options.program);
  JoinEvents& lifecycle = *this;  // a private base: converted here, not in make_unique
  join_ = std::make_unique<JoinPhase>(
      spec, JoinSizing{options_.connections, options_.descriptor_limit, options_.max_connections}, loop_, console_,
      lifecycle);
  NodePlan own;
  own.node_rank = 0;
  own.host = spec.own_host;
  Status preflight = starter_.Preflight({own}, {options_.agent_path, options_.agent_version, options_.working_dir});
  if (!preflight.ok()) {
    console_.PrintError("dslaunch: " + preflight.message() + (preflight.message().ends_with("\n") ? "" : "\n"));
    return kExitInfrastructure;
  }
  join_->Open(job_id_, port());
  WaitForSignal();
  join_->Reconsider();  // a one-node job is complete at once
  loop_.Run();
  return exit_code_;
}

// ---- The lifecycle of a generation ----

// The candidates of spec_ are set up: starts generation 0; false when the policy refuses to start
// (too few reachable nodes: it said why).
bool JobRunner::Impl::Begin(const std::vector<int>& unreachable) {
  fleet_.StartHeartbeats();
  Decision first = policy_->Start(unreachable);
  if (first.kind != Decision::Kind::kRun) {
    console_.PrintError(first.line + "\n");
    return false;
  }
  for (int c : unreachable) fleet_.Probe(c);
  if (policy_->restartable()) console_.PrintError(first.line + "\n");
  StartGeneration(first.active, "", 0);
  return true;
}

// Starts generation policy_->generation() on `active` (candidate indices, node-rank order).
void JobRunner::Impl::StartGeneration(const std::vector<int>& active, const std::string& reason,
                                      int64_t fault_time_ms) {
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
  if (spec_->model_grid) SetModelGrid(plan_, *spec_->model_grid);
  tracker_ = std::make_unique<JobTracker>(plan_);
  fault_time_ms_ = 0;
  workers_started_ = 0;
  options_.events.Record(generation, "generation_start", reason);
  feed_.OnGeneration(plan_);
  members_ = active;
  if (generation > 0) {
    // Workers of earlier generations (stopped late, partitioned) can never touch this one's
    // keys: their store connections are closed and refused from now on, and their keys go
    // (docs/protocol.md, "Generations").
    endpoint_->BeginGeneration(generation);
    fleet_.EndStoreProxies();  // and the agents' store proxies
    store_->DeleteGenerationsBefore(generation);
  }
  fleet_.SetMembers(generation, active);  // the agents of the others are released
  bool waiting = false;
  for (size_t r = 0; r < active.size(); ++r) {
    if (fleet_.seated(active[r])) {
      fleet_.SendAssignment(active[r], MakeAssignment(static_cast<int>(r)));
      Apply(tracker_->OnAgentRegistered(static_cast<int>(r)));
    } else {
      waiting = true;
      fleet_.StartAgentIfNone(active[r]);
    }
    if (finished_) return;
  }
  if (waiting && tracker_->state() == JobState::kStarting) {
    registration_timer_->After(kRegistrationTimeout, [this, generation] {
      if (generation != plan_.generation || tracker_->state() != JobState::kStarting) return;
      Apply(tracker_->OnStartupFailed("not every agent registered within " +
                                      std::to_string(kRegistrationTimeout.count()) + " s"));
    });
  }
}

control::Assignment JobRunner::Impl::MakeAssignment(int node_rank) const {
  const NodePlan& node = plan_.nodes[node_rank];
  control::Assignment a;
  a.generation = plan_.generation;
  a.node_rank = node.node_rank;
  a.log_dir = options_.log_dir;
  a.working_dir = options_.working_dir;
  a.grace_period_ms = options_.grace_period.count();
  a.tee = !options_.console.ShowsNothing();
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
  return a;  // the fleet adds the agent to fence (fence_agent_pid)
}

// Carries out what the generation's tracker decided after an event.
void JobRunner::Impl::Apply(Action action) {
  feed_.Publish();
  switch (action) {
    case Action::kNone:
      return;
    case Action::kStopAll: {
      if (fault_time_ms_ == 0) {
        fault_time_ms_ = loop_.UnixMillis();
        const auto& cause = tracker_->root_cause();
        options_.events.Record(plan_.generation, "fault", cause ? DescribeRootCause(*cause) : "");
      }
      const std::chrono::milliseconds grace = StopGrace();
      fleet_.SendStop(members_, grace.count(), "job is stopping");
      registration_timer_->Cancel();
      ArmStopDeadline(grace + kStopReportMargin);
      return;
    }
    case Action::kKillAll:
      console_.PrintError("dslaunch: interrupted again: killing every worker now (SIGKILL)\n");
      fleet_.SendStop(members_, 0, "interrupted again: kill now");
      // The grace period is over: wait only for the kills to be reported.
      ArmStopDeadline(kStopReportMargin);
      return;
    case Action::kFinish:
      EndGeneration();
      return;
  }
}

// Members that have not reported their workers' exits by then are given up (OnStopDeadline).
void JobRunner::Impl::ArmStopDeadline(std::chrono::milliseconds after) {
  const int generation = plan_.generation;
  stop_timer_->After(after, [this, generation] {
    if (generation == plan_.generation && !finished_) Apply(tracker_->OnStopDeadline());
  });
}

// The grace period of this generation's stop (kFailureStopGrace).
std::chrono::milliseconds JobRunner::Impl::StopGrace() const {
  const auto& cause = tracker_->root_cause();
  const bool healthy_stop =
      !cause || cause->kind == RootCause::Kind::kSignal || cause->kind == RootCause::Kind::kRescale;
  if (healthy_stop || !policy_->restartable()) return options_.grace_period;
  return FailureStopGrace(options_.grace_period);
}

// The generation's tracker finished: every member reported done, was lost, or missed the stop
// deadline. The policy decides what follows.
void JobRunner::Impl::EndGeneration() {
  stop_timer_->Cancel();
  registration_timer_->Cancel();
  // A member that was lost, missed the stop deadline, or leaves on its own (it said so with
  // AGENT_STOPPING) cannot take part in the next generation.
  std::vector<int> gone;
  for (int node_rank : tracker_->unfinished_nodes()) gone.push_back(members_[node_rank]);
  for (int node_rank : tracker_->lost_nodes()) gone.push_back(members_[node_rank]);
  for (int c : gone) fleet_.Drop(c, /*kill=*/true);
  for (int c : leaving_) {
    gone.push_back(c);
    fleet_.Drop(c, /*kill=*/false);  // it exits by itself, after its final sweep
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
    for (int c : gone) fleet_.Probe(c);
    StartGeneration(d.active, outcome.description.empty() ? d.line : outcome.description, fault_time_ms_);
    return;
  }
  Finish(d);
}

void JobRunner::Impl::Finish(const Decision& d) {
  finished_ = true;
  exit_code_ = last_code_;
  feed_.OnFinished(exit_code_);
  if (policy_->generation() > 0 || d.kind == Decision::Kind::kStopRepeated) {
    console_.PrintError(FormatGenerationHistory(*policy_));
    if (!d.line.empty()) console_.PrintError(d.line + "\n");
  }
  console_.PrintError(FormatSummary(job_id_, *tracker_));
  console_.PrintError(output_loss_.Summary(job_id_));
  registration_timer_->Cancel();
  // Node mode: every node's process ends with the job's code (control::Assignment::await_release).
  fleet_.ReleaseAll(node_mode_ ? exit_code_ : -1);
  endpoint_->Stop();
  fleet_.AwaitExits();
}

void JobRunner::Impl::WaitForSignal() {
  loop_.OnNextSignal([this](int sig) {
    if (tracker_ == nullptr) {  // node mode, still joining
      DSLAUNCH_CHECK(join_ != nullptr) << "a signal before the first generation outside node mode";
      join_->Fail("the launcher received " + SignalName(sig),
                  sig == SIGUSR1 ? kExitRequeue : ShellExitCode(ExitStatus::Signaled(sig)));
      return;
    }
    Apply(tracker_->OnSignal(sig));
    WaitForSignal();
  });
}

// A failed node answers again (a re-probe, or a node-mode rejoin): the policy may scale up.
void JobRunner::Impl::NodeReturned(int candidate) {
  std::optional<Decision> d = policy_->OnNodeReturned(candidate);
  if (!d || d->kind != Decision::Kind::kRescale) return;
  console_.PrintError(d->line + "\n");
  Apply(tracker_->OnRescale(d->reason));
}

// ---- What the fleet reports ----

Status JobRunner::Impl::OnRegister(AgentLink& link, const control::Register& reg) {
  if (node_mode_ && reg.slots > 0) return join_->OnJoin(link, reg);
  if (tracker_ == nullptr) {
    fleet_.Refuse(link, "the job has not started: its nodes are still joining");
    return Status::Ok();
  }
  const bool stopping =
      finished_ || tracker_->state() == JobState::kStopping || tracker_->state() == JobState::kFinished;
  const std::optional<int> node_rank = fleet_.Admit(link, reg.node_rank, stopping);
  if (!node_rank) return Status::Ok();  // refused
  fleet_.SendAssignment(reg.node_rank, MakeAssignment(*node_rank));
  Apply(tracker_->OnAgentRegistered(*node_rank));
  if (tracker_->state() == JobState::kRunning) registration_timer_->Cancel();
  return Status::Ok();
}

void JobRunner::Impl::OnAgentMessage(int candidate, const control::Message& msg) {
  const int node_rank = fleet_.node_rank(candidate);
  if (node_rank < 0 || finished_) return;  // not in this generation: being heard is all it says
  feed_.OnAgentMessage(node_rank, msg);
  OnAgentMessageOfGeneration(candidate, node_rank, msg);
}

void JobRunner::Impl::OnAgentMessageOfGeneration(int candidate, int node_rank, const control::Message& msg) {
  const std::string host = options_.show_host ? fleet_.node(candidate).host : "";
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, control::Register> || std::is_same_v<T, control::Assignment> ||
                      std::is_same_v<T, control::Stop> || std::is_same_v<T, control::Release> ||
                      std::is_same_v<T, control::SnapshotPeers>) {
          return;  // not sent by agents after registration
        } else {
          if (m.generation != plan_.generation) return;  // a stale peer is never trusted
          if constexpr (std::is_same_v<T, control::Output>) {
            const int local_rank =
                node_rank < static_cast<int>(plan_.nodes.size()) ? LocalRankOf(plan_.nodes[node_rank], m.rank) : -1;
            if (options_.console.Shows(local_rank, m.stream)) console_.PrintOutput(m, host);
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

void JobRunner::Impl::OnAgentClosed(int node_rank, const Status& why) {
  if (node_rank >= 0 && !finished_) feed_.OnAgentLost(node_rank);
  if (finished_ || node_rank < 0 || tracker_->agent_done(node_rank)) return;
  Apply(tracker_->OnAgentLost(node_rank, "control connection closed (" + why.ToString() + ")", std::nullopt));
}

void JobRunner::Impl::OnMemberLost(int node_rank, const std::string& why, std::optional<ExitStatus> status) {
  Apply(tracker_->OnAgentLost(node_rank, why, status));
}

// An agent whose workers are done exits, unless it waits for the next ASSIGNMENT (a restartable
// job) or for RELEASE (node mode).
bool JobRunner::Impl::AgentLeavesWhenDone(int node_rank) const {
  return tracker_->agent_done(node_rank) && !policy_->restartable() && !node_mode_;
}

// ---- What the join phase reports ----

void JobRunner::Impl::OnMembershipComplete(const JobSpec& job, size_t max_connections,
                                           const std::vector<std::pair<int, AgentLink*>>& seats) {
  endpoint_->SetMaxConnections(max_connections);
  spec_ = &job;
  policy_ = std::make_unique<ElasticPolicy>(job.elastic, Hosts(job.candidates));
  fleet_.SetUp(job.everyone.nodes, job.probe_starter);
  for (const auto& [candidate, link] : seats) fleet_.SeatJoined(candidate, *link);
  const bool started = Begin({});  // every member is reachable: the policy starts on all of them
  DSLAUNCH_CHECK(started) << "node mode: generation 0 refused";
}

void JobRunner::Impl::OnJoinFailed(int code) {
  finished_ = true;
  exit_code_ = code;
  endpoint_->Stop();
  loop_.Stop();
}

bool JobRunner::Impl::PlaceFree(int candidate) const {
  return !fleet_.seated(candidate) && policy_->state(candidate) == NodeState::kFailed;
}

void JobRunner::Impl::OnRejoined(int candidate, AgentLink& link) {
  fleet_.SeatRejoined(candidate, link);
  NodeReturned(candidate);
}

// ---- JobRunner ----

JobRunner::JobRunner(JobRunnerOptions options, std::string job_id, std::string secret,
                     AgentStarter& starter, Console& console)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(job_id), std::move(secret), starter, console)) {}
JobRunner::~JobRunner() = default;
Status JobRunner::Listen() { return impl_->Listen(); }
uint16_t JobRunner::port() const { return impl_->port(); }
int JobRunner::Run(const JobSpec& spec) { return impl_->Run(spec); }
int JobRunner::RunNodeMode(const NodeModeSpec& spec) { return impl_->RunNodeMode(spec); }

}  // namespace dslaunch::launcher
