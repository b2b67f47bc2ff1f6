#include "launcher/job/join_phase.h"

#include <algorithm>

#include "common/check.h"
#include "common/exit_codes.h"

namespace dslaunch::launcher {

JoinPhase::JoinPhase(NodeModeSpec spec, JoinSizing sizing, JobLoop& loop, Console& console, JoinEvents& events)
    : spec_(std::move(spec)),
      sizing_(sizing),
      loop_(loop),
      console_(console),
      events_(events),
      membership_(spec_.min_nodes, spec_.max_nodes, spec_.join_timeout, spec_.last_call_timeout, loop.Now()),
      timer_(loop.NewTimer()) {}

void JoinPhase::Open(const std::string& job_id, uint16_t port) {
  // This node is a member from the start; its agent starts with the job (node 0, the local one).
  auto self = membership_.Join(JoinRequest{spec_.own_host, spec_.own_slots, std::nullopt, true});
  DSLAUNCH_CHECK(self.ok()) << self.status().ToString();
  const std::string range = spec_.min_nodes == spec_.max_nodes
                                ? std::to_string(spec_.max_nodes)
                                : std::to_string(spec_.min_nodes) + ":" + std::to_string(spec_.max_nodes);
  console_.PrintError("dslaunch: rendezvous of job " + job_id + " for " + range + " nodes at port " +
                      std::to_string(port) + ": waiting up to " + std::to_string(spec_.join_timeout.count()) +
                      " s for the other nodes\n");
}

void JoinPhase::Reconsider() {
  const JoinVerdict v = membership_.Decide(loop_.Now());
  switch (v.kind) {
    case JoinVerdict::Kind::kComplete:
      Complete();
      return;
    case JoinVerdict::Kind::kFail:
      Fail(v.reason, kExitInfrastructure);
      return;
    case JoinVerdict::Kind::kWait:
      timer_->At(v.wake_at, [this] {
        if (!complete_ && !events_.JobOver()) Reconsider();
      });
      return;
  }
}

Status JoinPhase::RefuseJoin(AgentLink& link, const std::string& host, const std::string& why) {
  console_.PrintError("dslaunch: rendezvous: refused " + host + ": " + why + "\n");
  events_.Refuse(link, why);
  return Status::Ok();
}

Status JoinPhase::OnJoin(AgentLink& link, const control::Register& reg) {
  if (events_.JobOver()) return RefuseJoin(link, reg.host, "the job is over");
  JoinRequest request{reg.host, reg.slots, reg.node_rank >= 0 ? std::optional<int>(reg.node_rank) : std::nullopt,
                      false};
  if (complete_) return OnRejoin(link, request);
  auto arrival = membership_.Join(request);
  if (!arrival.ok()) return RefuseJoin(link, reg.host, arrival.status().message());
  link.set_arrival(*arrival);
  joined_[*arrival] = &link;
  if (ShowArrival(membership_.joined(), spec_.max_nodes)) {
    console_.PrintError("dslaunch: rendezvous: " + reg.host + " joined (" + std::to_string(membership_.joined()) +
                        " of " + std::to_string(spec_.max_nodes) + ")\n");
  }
  Reconsider();
  return Status::Ok();
}

void JoinPhase::OnLeft(int arrival) {
  if (complete_ || joined_.erase(arrival) == 0) return;
  console_.PrintError("dslaunch: rendezvous: " + membership_.request(arrival).host + " left before the start\n");
  membership_.Leave(arrival);
  Reconsider();
}

// A node-mode agent that arrives once the job runs takes the place of a lost member: the one that
// asked for the same node rank, else the one on the same host (a replaced pod of an Indexed Job
// has both). The policy then treats it as a failed node that answered again.
Status JoinPhase::OnRejoin(AgentLink& link, const JoinRequest& request) {
  for (size_t c = 1; c < job_.everyone.nodes.size(); ++c) {
    const bool same =
        request.node_rank ? asked_rank_[c] == request.node_rank : job_.everyone.nodes[c].host == request.host;
    if (!same) continue;
    if (!events_.PlaceFree(static_cast<int>(c))) {
      // Most likely the lost node's generation is still stopping, and the place is free soon: the
      // replacement is told to come back (the infrastructure class: a scheduler replaces the pod
      // and does not count it, docs/exit-codes.md), not that its command line is wrong.
      const std::string why = "the place of node " + std::to_string(c) + " (" + job_.everyone.nodes[c].host +
                              ") is still held by a live member of the job; try again later";
      console_.PrintError("dslaunch: rendezvous: not letting " + request.host + " in: " + why + "\n");
      link.Send(control::Release{0, kExitInfrastructure, why});
      link.Close();
      return Status::Ok();
    }
    console_.PrintError("dslaunch: rendezvous: " + request.host + " rejoined in the place of node " +
                        std::to_string(c) + "\n");
    events_.OnRejoined(static_cast<int>(c), link);
    return Status::Ok();
  }
  return RefuseJoin(link, request.host,
                    "node '" + request.host + "' is not one of this job's nodes; once the job runs, a node can only " +
                        "rejoin in the place of a lost one (same --node_rank, or same host)");
}

void JoinPhase::Complete() {
  complete_ = true;
  timer_->Cancel();
  const std::vector<int> order = membership_.NodeRankOrder();
  Members members = membership_.InRankOrder();
  asked_rank_ = std::move(members.asked_ranks);
  job_ = spec_.job;
  job_.candidates = members.resources;
  auto plan = PlanLaunch(job_.candidates, job_.plan_options);
  if (!plan.ok()) {
    Fail(plan.status().message(), kExitUsage);
    return;
  }
  job_.everyone = std::move(*plan);
  const int joined = static_cast<int>(order.size());
  // The other nodes' workers are known now: a job that does not fit the descriptor limit stops
  // here, before any worker starts, not by refusing connections mid-rendezvous.
  ConnectionDemand demand = sizing_.connections;
  demand.ranks = job_.everyone.world_size;
  demand.nodes = joined;
  auto budget = FitConnections(demand, sizing_.descriptor_limit);
  if (!budget.ok()) {
    Fail(budget.status().message(), kExitUsage);
    return;
  }
  const size_t max_connections = std::max(sizing_.max_connections, static_cast<size_t>(budget->max_connections));
  job_.elastic.min_nodes = std::min(spec_.min_nodes, joined);
  job_.elastic.max_nodes = joined;
  console_.PrintError("dslaunch: rendezvous complete: " + std::to_string(joined) + " nodes, " +
                      std::to_string(job_.everyone.world_size) + " workers: " + members.line + "\n");
  // Generation 0's plan on every node has checked the options and made the candidates; each
  // generation plans its own workers, so these are not kept (~1 KB per rank).
  for (NodePlan& n : job_.everyone.nodes) {
    std::vector<WorkerPlan>().swap(n.workers);
    n.env.clear();
  }
  std::vector<std::pair<int, AgentLink*>> seats;
  for (size_t c = 0; c < order.size(); ++c) {
    auto it = joined_.find(order[c]);
    if (it == joined_.end()) continue;  // node 0: this node's agent starts with generation 0
    seats.emplace_back(static_cast<int>(c), it->second);
  }
  joined_.clear();
  events_.OnMembershipComplete(job_, max_connections, seats);
}

// The join phase ends without a job: every waiting node is told the exit code.
void JoinPhase::Fail(const std::string& why, int code) {
  console_.PrintError("dslaunch: rendezvous failed: " + why + "\n");
  timer_->Cancel();
  for (auto& [arrival, link] : joined_) {
    link->Send(control::Release{0, code, {}});
    link->Close();
  }
  joined_.clear();
  events_.OnJoinFailed(code);
}

}  // namespace dslaunch::launcher
