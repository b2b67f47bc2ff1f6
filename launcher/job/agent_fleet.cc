#include "launcher/job/agent_fleet.h"

#include "common/snapshot/slot_header.h"
#include "common/text.h"
#include "dslaunch/config.h"
#include "launcher/elastic/elastic_policy.h"
#include "launcher/job/snapshot_peers.h"

namespace dslaunch::launcher {

AgentFleet::AgentFleet(Options options, AgentStarter& starter, Console& console, JobLoop& loop, FleetEvents& events)
    : options_(std::move(options)),
      starter_(starter),
      console_(console),
      loop_(loop),
      events_(events),
      heartbeat_timer_(loop.NewTimer()),
      last_heartbeat_check_(loop.Now()),
      exit_timer_(loop.NewTimer()) {}

AgentFleet::~AgentFleet() {
  // Handles join their reporting threads; their callbacks post to the loop, which outlives them.
  for (Place& p : places_) p.handle.reset();
  retired_handles_.clear();
  for (std::thread& t : probes_) t.join();
}

// ---- Links ----

std::unique_ptr<SessionHandler> AgentFleet::Accept(std::shared_ptr<EndpointConnection> conn,
                                                   std::shared_ptr<StoreService> store) {
  LinkEvents& owner = *this;  // a private base: converted here, not in make_unique
  return std::make_unique<AgentLink>(owner, std::move(conn), std::move(store), options_.job_id);
}

Status AgentFleet::OnRegister(AgentLink& link, const control::Register& reg) {
  link.set_agent(reg.pid, reg.host, reg.snapshot_address);
  if (reg.job_id != options_.job_id) {
    Refuse(link, "agent of job '" + reg.job_id + "' at job '" + options_.job_id + "'");
    return Status::Ok();
  }
  if (reg.protocol_version != control::kProtocolVersion || reg.version != DSLAUNCH_VERSION) {
    Refuse(link, "agent version " + reg.version + " (protocol " + std::to_string(reg.protocol_version) +
                     ") does not match the launcher's " + DSLAUNCH_VERSION);
    return Status::Ok();
  }
  return events_.OnRegister(link, reg);
}

void AgentFleet::OnMessage(AgentLink& link, const control::Message& msg) {
  places_[link.node()].heartbeat->OnHeard(loop_.Now());
  events_.OnAgentMessage(link.node(), msg);
}

void AgentFleet::OnClosed(AgentLink& link, const Status& why) {
  if (link.node() < 0) {
    if (link.arrival() >= 0) events_.OnJoinedClosed(link.arrival());
    return;
  }
  Place& p = places_[link.node()];
  if (p.link != &link) return;  // dropped already, or replaced
  p.link = nullptr;
  events_.OnAgentClosed(p.node_rank, why);
}

void AgentFleet::Refuse(AgentLink& link, const std::string& why) {
  link.Send(control::Stop{generation_, 0, why});
  link.Close();
}

// ---- Places ----

void AgentFleet::SetUp(const std::vector<NodePlan>& everyone,
                       std::function<std::unique_ptr<AgentStarter>()> probe_starter) {
  probe_starter_ = std::move(probe_starter);
  places_.resize(everyone.size());
  for (size_t i = 0; i < places_.size(); ++i) {
    // Starting and probing an agent needs the node's host, user and slots, not its workers or
    // their environment: each generation's plan has those (a copy here cost ~0.5 KB per rank).
    NodePlan& node = places_[i].node;
    node.node_rank = everyone[i].node_rank;
    node.user = everyone[i].user;
    node.host = everyone[i].host;
    node.slots = everyone[i].slots;
    places_[i].heartbeat.emplace(options_.heartbeat_timeout, loop_.Now());
  }
}

// `link` takes place `candidate`. An earlier agent of the place on the same host is the one the
// new agent fences before it starts any worker.
void AgentFleet::Seat(int candidate, AgentLink& link) {
  Place& p = places_[candidate];
  p.fence_pid = p.agent_pid != 0 && p.agent_host == link.agent_host() ? p.agent_pid : 0;
  p.agent_pid = link.agent_pid();
  p.agent_host = link.agent_host();
  p.link = &link;
}

std::optional<int> AgentFleet::Admit(AgentLink& link, int candidate, bool stopping) {
  const int nodes = static_cast<int>(places_.size());
  if (candidate < 0 || candidate >= nodes) {
    Refuse(link, "node " + std::to_string(candidate) + " is outside 0.." + std::to_string(nodes - 1));
    return std::nullopt;
  }
  Place& p = places_[candidate];
  if (p.link != nullptr) {
    Refuse(link, "node " + std::to_string(candidate) + " already has an agent");
    return std::nullopt;
  }
  if (stopping) {
    Refuse(link, "the job is stopping");
    return std::nullopt;
  }
  // An agent is admitted only where this launcher is waiting for one: a stale agent of an
  // earlier generation (a node that was lost and came back) is never trusted.
  if (!p.expecting || p.node_rank < 0) {
    Refuse(link, "node " + std::to_string(candidate) + " has no agent expected in generation " +
                     std::to_string(generation_));
    return std::nullopt;
  }
  p.expecting = false;
  link.set_node(candidate);
  Seat(candidate, link);
  p.heartbeat->OnHeard(loop_.Now());
  return p.node_rank;
}

void AgentFleet::SeatJoined(int candidate, AgentLink& link) {
  link.set_node(candidate);
  link.set_arrival(-1);
  Seat(candidate, link);
  places_[candidate].heartbeat->OnHeard(loop_.Now());
}

void AgentFleet::SeatRejoined(int candidate, AgentLink& link) {
  link.set_node(candidate);
  Seat(candidate, link);
  places_[candidate].awaiting_assignment = true;
  places_[candidate].heartbeat->OnHeard(loop_.Now());
}

// ---- Generations ----

void AgentFleet::SetMembers(int generation, const std::vector<int>& members) {
  generation_ = generation;
  members_ = members;
  members_assigned_ = 0;
  snapshot_peers_sent_ = false;
  for (Place& p : places_) p.node_rank = -1;
  for (size_t r = 0; r < members.size(); ++r) places_[members[r]].node_rank = static_cast<int>(r);
  // Agents of the previous generation that are not members of this one are released.
  for (Place& p : places_) {
    if (p.node_rank < 0 && p.link != nullptr) {
      p.link->Send(control::Release{generation, -1, {}});
      p.link->Close();
    }
  }
}

void AgentFleet::EndStoreProxies() {
  for (Place& p : places_) {
    if (p.link != nullptr) p.link->EndStoreProxy();
  }
}

void AgentFleet::SendAssignment(int candidate, control::Assignment assignment) {
  Place& p = places_[candidate];
  assignment.fence_agent_pid = p.fence_pid;
  p.link->Send(assignment);
  p.awaiting_assignment = false;
  if (p.node_rank >= 0 && p.assigned_generation != generation_) {
    p.assigned_generation = generation_;
    if (++members_assigned_ == members_.size()) SendSnapshotPeers();
  }
}

// Once every member of the generation has its ASSIGNMENT: each is told its peers for in-memory
// snapshot copies (launcher/job/snapshot_peers.h). A member whose link closed since has no address
// and is told nothing.
void AgentFleet::SendSnapshotPeers() {
  if (snapshot_peers_sent_) return;
  snapshot_peers_sent_ = true;
  std::vector<std::string> addresses;
  for (int candidate : members_) {
    const AgentLink* link = places_[candidate].link;
    addresses.push_back(link != nullptr ? link->snapshot_address() : std::string());
  }
  for (size_t r = 0; r < members_.size(); ++r) {
    AgentLink* link = places_[members_[r]].link;
    if (link == nullptr) continue;
    link->Send(control::SnapshotPeers{generation_,
                                      SnapshotPeersOf(addresses, r, static_cast<size_t>(snapshot::kMaxReplicas))});
  }
}

void AgentFleet::StartAgentIfNone(int candidate) {
  if (!places_[candidate].expecting) StartAgent(candidate);
}

void AgentFleet::StartAgent(int candidate) {
  Place& p = places_[candidate];
  if (p.handle != nullptr) {
    // The previous agent of this node is gone or lost; its handle still reports its exit.
    if (p.agent_running) p.handle->Kill();
    retired_handles_.push_back(std::move(p.handle));
  }
  const uint64_t serial = ++agent_serial_;
  AgentCommand command{options_.agent_path, options_.advertise_host, port_, options_.job_id, candidate, std::nullopt};
  AgentCallbacks callbacks;
  callbacks.on_output = [this](std::string line) {
    loop_.Post([this, line = std::move(line)] { console_.PrintError(line + "\n"); });
  };
  callbacks.on_exit = [this, candidate, serial](std::optional<ExitStatus> status, std::string detail) {
    loop_.Post([this, candidate, serial, status, detail = std::move(detail)] {
      OnProcessExit(candidate, serial, status, detail);
    });
  };
  p.expecting = true;
  auto handle = starter_.Start(p.node, command, options_.secret, std::move(callbacks));
  if (!handle.ok()) {
    p.expecting = false;
    if (p.node_rank >= 0) {
      events_.OnMemberLost(p.node_rank, "could not start the agent: " + handle.status().message(), std::nullopt);
    }
    return;
  }
  p.handle = std::move(*handle);
  p.handle_serial = serial;
  p.agent_running = true;
  ++agents_started_;
}

void AgentFleet::OnProcessExit(int candidate, uint64_t serial, std::optional<ExitStatus> status,
                               const std::string& detail) {
  Place& p = places_[candidate];
  if (serial == p.handle_serial) p.agent_running = false;
  ++agents_exited_;
  if (over_) {
    if (AllAgentsExited()) loop_.Stop();
    return;
  }
  // After registration the control connection tells the story (AGENT_DONE, or a broken
  // connection); before it, the process exit is all there is.
  if (serial == p.handle_serial && p.expecting) {
    p.expecting = false;
    if (p.node_rank >= 0) {
      std::string what = status ? "agent exited with " + DescribeExitStatus(*status) : "agent ended";
      events_.OnMemberLost(p.node_rank, what + " before registering (" + detail + ")", status);
    }
  }
}

void AgentFleet::SendStop(const std::vector<int>& candidates, int64_t grace_ms, const std::string& reason) {
  for (int c : candidates) {
    if (places_[c].link != nullptr) places_[c].link->Send(control::Stop{generation_, grace_ms, reason});
  }
}

void AgentFleet::Drop(int candidate, bool kill) {
  Place& p = places_[candidate];
  p.expecting = false;
  if (p.link != nullptr) {
    AgentLink* link = p.link;
    p.link = nullptr;
    link->Close();
  }
  if (kill && p.handle != nullptr && p.agent_running) p.handle->Kill();
}

// ---- Re-probes ----

void AgentFleet::Probe(int candidate) {
  Place& p = places_[candidate];
  if (!probe_starter_ || p.probing || over_) return;
  p.probing = true;
  std::shared_ptr<JobTimer> timer = loop_.NewTimer();  // kept by its own callback until it runs
  timer->After(ReprobeDelay(p.failed_probes), [this, candidate, timer] {
    if (over_) return;
    NodePlan node = places_[candidate].node;
    PreflightChecks checks{options_.agent_path, options_.agent_version, options_.working_dir};
    probes_.emplace_back([this, candidate, node = std::move(node), checks] {
      std::unique_ptr<AgentStarter> prober = probe_starter_();
      Status s = prober->Preflight({node}, checks);
      loop_.Post([this, candidate, ok = s.ok()] { OnProbed(candidate, ok); });
    });
  });
}

void AgentFleet::OnProbed(int candidate, bool answered) {
  Place& p = places_[candidate];
  p.probing = false;
  if (over_ || !events_.NodeFailed(candidate)) return;
  if (!answered) {
    ++p.failed_probes;
    events_.OnNodeUnreachable(candidate);
    Probe(candidate);
    return;
  }
  p.failed_probes = 0;
  events_.OnNodeAnswered(candidate);
}

// ---- Heartbeats ----

void AgentFleet::StartHeartbeats() {
  last_heartbeat_check_ = loop_.Now();
  ScheduleHeartbeats();
}

void AgentFleet::ScheduleHeartbeats() {
  heartbeat_timer_->After(options_.heartbeat_interval, [this] {
    if (!over_) CheckHeartbeats();
  });
}

void AgentFleet::CheckHeartbeats() {
  const auto now = loop_.Now();
  if (CheckerWasSuspended(last_heartbeat_check_, now, options_.heartbeat_timeout)) {
    // The launcher itself was not running (SIGSTOP, a frozen VM): the agents' silence over
    // that time proves nothing. They get a fresh timeout; an agent that gave up on the
    // launcher meanwhile says so with AGENT_STOPPING, which names the real cause.
    console_.PrintError("dslaunch: the launcher was suspended for " +
                        FormatSeconds(std::chrono::duration_cast<std::chrono::milliseconds>(
                            now - last_heartbeat_check_)) +
                        "\n");
    for (Place& p : places_) p.heartbeat->OnHeard(now);
  }
  last_heartbeat_check_ = now;
  for (Place& p : places_) {
    AgentLink* link = p.link;
    // An agent whose workers are done exits, unless it waits for the next ASSIGNMENT (a
    // restartable job) or for RELEASE (node mode): those still watch for heartbeats.
    if (link == nullptr || p.awaiting_assignment || (p.node_rank >= 0 && events_.AgentLeavesWhenDone(p.node_rank))) {
      continue;
    }
    if (p.heartbeat->Expired(now)) {
      auto silence = std::chrono::duration<double>(p.heartbeat->Silence(now)).count();
      p.link = nullptr;
      link->Close();
      if (p.node_rank >= 0) {
        events_.OnMemberLost(
            p.node_rank,
            "no heartbeat for " + FormatSeconds(std::chrono::milliseconds(static_cast<int64_t>(silence * 1000))),
            std::nullopt);
      }
      if (over_) return;
      continue;
    }
    link->Send(control::Heartbeat{generation_, ++heartbeat_sequence_});
  }
  ScheduleHeartbeats();
}

// ---- The end ----

void AgentFleet::ReleaseAll(int code) {
  over_ = true;
  heartbeat_timer_->Cancel();
  for (Place& p : places_) {
    if (p.link == nullptr) continue;
    p.link->Send(control::Release{generation_, code, {}});
    // Flushed before the endpoint stops: aborted at once, a RELEASE still queued behind another
    // frame was lost, and the agent waited for its heartbeat timeout (found by sim_scale).
    p.link->Close();
  }
}

void AgentFleet::AwaitExits() {
  if (AllAgentsExited()) {
    loop_.Stop();
    return;
  }
  // Agents exit right after AGENT_DONE (or RELEASE); one that does not is killed, and if even
  // the kill is not reported (a dead SSH connection), the launcher stops waiting.
  exit_timer_->After(kAgentExitWait, [this] {
    for (Place& p : places_) {
      if (p.handle != nullptr && p.agent_running) p.handle->Kill();
    }
    exit_timer_->After(kAgentKillWait, [this] { loop_.Stop(); });
  });
}

}  // namespace dslaunch::launcher
