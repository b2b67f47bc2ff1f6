// JoinPhase: node mode's rendezvous (docs/node-mode.md, "Rendezvous") on the node that hosts the
// endpoint, before the job's first generation and, once it runs, for nodes that come back. The
// nodes that register join a NodeMembership (launcher/node_mode/membership.h, which decides);
// after every arrival, departure and timer it asks the membership again: wait (a timer until
// when), complete (the job of the nodes that joined goes to the lifecycle, which starts it), or
// fail (every joined node gets RELEASE with the exit code). Once the job runs, a node that joins
// may only take the place of a lost member. The lifecycle answers through JoinEvents.
//
// Threading: the loop's thread (JobLoop).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/control_messages.h"
#include "common/status.h"
#include "launcher/job/agent_link.h"
#include "launcher/job/console.h"
#include "launcher/job/job_loop.h"
#include "launcher/job/job_spec.h"
#include "launcher/machine/connection_budget.h"
#include "launcher/node_mode/membership.h"

namespace dslaunch::launcher {

// What the join phase asks of the job's lifecycle (JobRunner::Impl), and tells it.
class JoinEvents {
 public:
  virtual ~JoinEvents() = default;
  // The job is over: a late arrival is refused.
  virtual bool JobOver() const = 0;
  // Tells an agent why it is not admitted (STOP) and closes its link (AgentFleet::Refuse).
  virtual void Refuse(AgentLink& link, const std::string& why) = 0;
  // The membership is complete. `job`: the job of the nodes that joined (candidates in node-rank
  // order, generation 0's plan without its workers, the elastic range), alive as long as the join
  // phase; `max_connections`: the endpoint's bound for it; `seats`: candidate and link of every
  // node that joined over the network (node 0, this node, has none: its agent starts with
  // generation 0). The lifecycle seats them and starts generation 0.
  virtual void OnMembershipComplete(const JobSpec& job, size_t max_connections,
                                    const std::vector<std::pair<int, AgentLink*>>& seats) = 0;
  // The join phase failed (the joined nodes were told `code`): the job ends with it.
  virtual void OnJoinFailed(int code) = 0;
  // Once the job runs: whether the place of `candidate` is free for a node that rejoins (no agent
  // holds it and the policy counts the node failed).
  virtual bool PlaceFree(int candidate) const = 0;
  // An agent rejoined in the place of lost `candidate`: the lifecycle seats it and offers the
  // node to the policy.
  virtual void OnRejoined(int candidate, AgentLink& link) = 0;
};

// The endpoint's connection bound, sized again from the nodes that joined.
struct JoinSizing {
  ConnectionDemand connections;  // this node's demand (its --nproc_per_node on every node)
  uint64_t descriptor_limit = UINT64_MAX;
  size_t max_connections = 0;  // the bound so far; the new one is never lower
};

class JoinPhase {
 public:
  // The join timeout runs from now (loop.Now()).
  JoinPhase(NodeModeSpec spec, JoinSizing sizing, JobLoop& loop, Console& console, JoinEvents& events);

  // This node joins (node 0, it hosts the endpoint at `port`) and the wait is announced. Call
  // Reconsider() next: a one-node job is complete at once.
  void Open(const std::string& job_id, uint16_t port);
  // The membership decides now (see the header comment).
  void Reconsider();
  // A REGISTER of node mode (slots > 0): refused (console line, then JoinEvents::Refuse), joined,
  // or, once the job runs, a rejoin in the place of a lost member. Always OK: a refusal closes
  // the link itself.
  Status OnJoin(AgentLink& link, const control::Register& reg);
  // A joined node's connection closed before the membership was complete: its place is free.
  void OnLeft(int arrival);
  // Ends the join phase without a job: every joined node gets RELEASE with `code`.
  void Fail(const std::string& why, int code);

 private:
  Status OnRejoin(AgentLink& link, const JoinRequest& request);
  Status RefuseJoin(AgentLink& link, const std::string& host, const std::string& why);
  void Complete();

  // -- Wiring --
  const NodeModeSpec spec_;
  const JoinSizing sizing_;
  JobLoop& loop_;
  Console& console_;
  JoinEvents& events_;
  // -- The membership --
  NodeMembership membership_;
  std::unique_ptr<JobTimer> timer_;            // the membership's next wake-up
  std::map<int, AgentLink*> joined_;           // arrival id -> link, until the membership is complete
  bool complete_ = false;
  // -- Once complete --
  JobSpec job_;                                 // the lifecycle runs this job
  std::vector<std::optional<int>> asked_rank_;  // candidate -> the node rank its node asked for
};

}  // namespace dslaunch::launcher
