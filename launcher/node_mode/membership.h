// Node mode (torchrun's rendezvous, docs/node-mode.md): one dslaunch per node, started by a
// scheduler; the node that hosts the endpoint waits for the others' agents to join, then numbers
// them. This file is the pure part: who has joined, which joins are refused, when the membership is
// complete or has failed, and the node ranks. No sockets; time is an input: the I/O shell
// (launcher/job/join_phase.cc) feeds it arrivals and departures, asks Decide(now) after each, and sets its
// timer to the wake-up time it is given.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/plan/resource_filter.h"

namespace dslaunch::launcher {

// How long the host waits for at least MIN nodes to join (torchrun's join_timeout default): pods
// start in any order, and pulling an image on a fresh node takes minutes.
inline constexpr std::chrono::seconds kDefaultJoinTimeout{600};
// Once MIN nodes have joined, how long the host still waits for more, up to MAX (torchrun's
// last_call_timeout default).
inline constexpr std::chrono::seconds kDefaultLastCallTimeout{30};

// One node asking to join.
struct JoinRequest {
  std::string host;               // the agent's hostname, as it reported it
  int slots = 0;                  // its workers (--nproc_per_node on that node), >= 1
  std::optional<int> node_rank;   // asked for (--node_rank, PET_NODE_RANK); absent: by arrival
  bool hosts_endpoint = false;    // the agent of the node that hosts the endpoint
};

// What the join phase does next (NodeMembership::Decide).
struct JoinVerdict {
  enum class Kind { kWait, kComplete, kFail };
  Kind kind = Kind::kWait;
  std::chrono::steady_clock::time_point wake_at;  // kWait: ask again then (or on the next event)
  std::string reason;                             // kFail: who came, and what to do
};

// Log lines of a rendezvous at scale (issue 16: no line per connection for thousands of nodes):
// the first kNamedArrivals arrivals get a line each, then one line at each tenth of --nnodes and
// at the last; the "rendezvous complete" line names at most kNamedMembers members.
inline constexpr int kNamedArrivals = 16;
inline constexpr int kNamedMembers = 16;

// Whether the arrival that made `joined` of `max_nodes` gets its own line (see above).
bool ShowArrival(int joined, int max_nodes);

// The members in node-rank order, as the job's candidates.
struct Members {
  Resources resources;                       // host, slots 0..n-1 of each member
  std::vector<std::optional<int>> asked_ranks;  // the node rank each asked for
  // "a (2), b (2)": host (workers) in rank order, at most kNamedMembers, then "... and N more"
  std::string line;
};

class NodeMembership {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // 1 <= min_nodes <= max_nodes; the join timeout runs from `start`.
  NodeMembership(int min_nodes, int max_nodes, std::chrono::seconds join_timeout = kDefaultJoinTimeout,
                 std::chrono::seconds last_call_timeout = kDefaultLastCallTimeout, TimePoint start = {});

  // Admits `request` and returns its arrival id (used by Leave and in NodeRanks' answer), or
  // kFailedPrecondition saying why it is refused: the membership is full, the asked-for rank is
  // outside 0..max-1 or taken (naming the host that has it), or it asks for rank 0 while another
  // node hosts the endpoint (rank 0 runs where MASTER_ADDR points), or the host node asks for a
  // rank other than 0.
  Result<int> Join(const JoinRequest& request);
  // A joined node's connection closed before the membership was complete: its place is free again.
  void Leave(int arrival);

  int joined() const { return static_cast<int>(present_.size()); }
  bool complete() const { return joined() == max_nodes_; }
  bool enough() const { return joined() >= min_nodes_; }
  // Who is waiting, for a timeout's message: "a (rank 0), b".
  std::string Describe() const;

  // At `now`: kComplete when max_nodes have joined, or min_nodes have and the last call (which
  // starts when min_nodes are first seen, and restarts if a departure drops below) is over; kFail
  // when the join timeout passed with fewer than min_nodes; otherwise kWait until the next of
  // those times.
  JoinVerdict Decide(TimePoint now);

  // The members in node-rank order (arrival ids): the host node first, then asked-for ranks in
  // their places, the others in arrival order in the lowest free places, then closed up (a rank
  // asked for beyond the number that joined moves down). Precondition: enough().
  std::vector<int> NodeRankOrder() const;
  // NodeRankOrder's members as candidates. Precondition: enough().
  Members InRankOrder() const;
  const JoinRequest& request(int arrival) const { return requests_[arrival]; }

 private:
  int min_nodes_;
  int max_nodes_;
  std::chrono::seconds join_timeout_;
  std::chrono::seconds last_call_timeout_;
  TimePoint join_deadline_;
  std::optional<TimePoint> last_call_end_;
  std::vector<JoinRequest> requests_;  // by arrival id
  std::vector<int> present_;          // arrival ids still joined, in arrival order
};

}  // namespace dslaunch::launcher
