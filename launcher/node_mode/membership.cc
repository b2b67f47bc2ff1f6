#include "launcher/node_mode/membership.h"

#include <algorithm>

#include "common/check.h"

namespace dslaunch::launcher {

NodeMembership::NodeMembership(int min_nodes, int max_nodes, std::chrono::seconds join_timeout,
                               std::chrono::seconds last_call_timeout, TimePoint start)
    : min_nodes_(min_nodes),
      max_nodes_(max_nodes),
      join_timeout_(join_timeout),
      last_call_timeout_(last_call_timeout),
      join_deadline_(start + join_timeout) {
  DSLAUNCH_CHECK(1 <= min_nodes && min_nodes <= max_nodes) << "node range " << min_nodes << ":" << max_nodes;
}

Result<int> NodeMembership::Join(const JoinRequest& r) {
  const std::string who = "node '" + r.host + "'";
  if (complete()) {
    return FailedPreconditionError(who + " arrived after all " + std::to_string(max_nodes_) +
                                   " nodes had joined; start at most --nnodes nodes");
  }
  if (r.node_rank) {
    const int want = *r.node_rank;
    if (want < 0 || want >= max_nodes_) {
      return FailedPreconditionError(who + " asks for node rank " + std::to_string(want) + ", outside 0.." +
                                     std::to_string(max_nodes_ - 1) + " of --nnodes");
    }
    if (r.hosts_endpoint && want != 0) {
      return FailedPreconditionError(who + " hosts the rendezvous endpoint but asks for node rank " +
                                     std::to_string(want) +
                                     "; the node at the endpoint is node 0 (give it --node_rank 0, or point "
                                     "--rdzv_endpoint at node " + std::to_string(want) + "'s address)");
    }
    for (int a : present_) {
      const JoinRequest& other = requests_[a];
      const int other_rank = other.hosts_endpoint ? 0 : other.node_rank.value_or(-1);
      if (other_rank == want) {
        return FailedPreconditionError(who + " asks for node rank " + std::to_string(want) + ", which node '" +
                                       other.host + "' has" +
                                       (other.hosts_endpoint ? " (it hosts the rendezvous endpoint)" : "") +
                                       "; give every node its own --node_rank");
      }
    }
  }
  // The last place is the host node's own agent's, which may join after the others.
  const bool host_present =
      std::any_of(present_.begin(), present_.end(), [&](int a) { return requests_[a].hosts_endpoint; });
  if (!r.hosts_endpoint && !host_present && joined() == max_nodes_ - 1) {
    return FailedPreconditionError(who + " arrived when " + std::to_string(max_nodes_ - 1) +
                                   " nodes and the host node make all " + std::to_string(max_nodes_) +
                                   " of --nnodes; start at most --nnodes nodes");
  }
  requests_.push_back(r);
  const int arrival = static_cast<int>(requests_.size()) - 1;
  present_.push_back(arrival);
  return arrival;
}

void NodeMembership::Leave(int arrival) {
  present_.erase(std::remove(present_.begin(), present_.end(), arrival), present_.end());
}

std::string NodeMembership::Describe() const {
  std::string s;
  for (int a : present_) {
    if (!s.empty()) s += ", ";
    s += requests_[a].host;
    if (requests_[a].hosts_endpoint) {
      s += " (endpoint)";
    } else if (requests_[a].node_rank) {
      s += " (rank " + std::to_string(*requests_[a].node_rank) + ")";
    }
  }
  return s.empty() ? "none" : s;
}

JoinVerdict NodeMembership::Decide(TimePoint now) {
  JoinVerdict v;
  if (complete()) {
    v.kind = JoinVerdict::Kind::kComplete;
    return v;
  }
  if (enough()) {
    if (!last_call_end_) last_call_end_ = now + last_call_timeout_;
    if (now >= *last_call_end_) {
      v.kind = JoinVerdict::Kind::kComplete;
    } else {
      v.wake_at = *last_call_end_;
    }
    return v;
  }
  last_call_end_.reset();  // a node left during the last call: back to waiting for min_nodes
  if (now >= join_deadline_) {
    v.kind = JoinVerdict::Kind::kFail;
    v.reason = "only " + std::to_string(joined()) + " of at least " + std::to_string(min_nodes_) +
               " nodes joined within " + std::to_string(join_timeout_.count()) + " s (joined: " + Describe() +
               "); start the others with the same --rdzv_endpoint, --rdzv_id and secret, or raise --rdzv_conf "
               "join_timeout";
    return v;
  }
  v.wake_at = join_deadline_;
  return v;
}

bool ShowArrival(int joined, int max_nodes) {
  if (joined <= kNamedArrivals || joined >= max_nodes) return true;
  // The first arrival at or past each tenth.
  return joined * 10 / max_nodes != (joined - 1) * 10 / max_nodes;
}

Members NodeMembership::InRankOrder() const {
  Members m;
  int named = 0;
  const std::vector<int> order = NodeRankOrder();
  for (int a : order) {
    const JoinRequest& r = requests_[a];
    NodeResources n;
    n.host = r.host;
    for (int slot = 0; slot < r.slots; ++slot) n.slots.push_back(slot);
    m.resources.push_back(std::move(n));
    m.asked_ranks.push_back(r.node_rank);
    if (named++ < kNamedMembers) {
      m.line += (m.line.empty() ? "" : ", ") + r.host + " (" + std::to_string(r.slots) + ")";
    }
  }
  if (named > kNamedMembers) m.line += ", ... and " + std::to_string(named - kNamedMembers) + " more";
  return m;
}

std::vector<int> NodeMembership::NodeRankOrder() const {
  DSLAUNCH_CHECK(enough()) << "node ranks of an incomplete membership";
  // Places 0..max-1: the host node at 0, asked-for ranks at theirs, the rest fill the lowest free
  // places in arrival order; empty places are then closed up.
  std::vector<int> place(max_nodes_, -1);
  for (int a : present_) {
    const JoinRequest& r = requests_[a];
    if (r.hosts_endpoint) {
      place[0] = a;
    } else if (r.node_rank) {
      place[*r.node_rank] = a;
    }
  }
  size_t next = 1;  // rank 0 is the host node's, even before it has joined
  for (int a : present_) {
    const JoinRequest& r = requests_[a];
    if (r.hosts_endpoint || r.node_rank) continue;
    while (next < place.size() && place[next] != -1) ++next;
    DSLAUNCH_CHECK(next < place.size()) << "more members than places";
    place[next++] = a;
  }
  std::vector<int> order;
  for (int a : place) {
    if (a != -1) order.push_back(a);
  }
  return order;
}

}  // namespace dslaunch::launcher
