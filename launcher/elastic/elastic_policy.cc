#include "launcher/elastic/elastic_policy.h"

#include <algorithm>
#include <utility>

#include "common/check.h"

namespace dslaunch::launcher {

std::chrono::milliseconds ReprobeDelay(int failed_probes) {
  DSLAUNCH_CHECK(failed_probes >= 0) << "ReprobeDelay: negative probe count " << failed_probes;
  std::chrono::milliseconds delay = kFirstReprobeDelay;
  for (int i = 0; i < failed_probes && delay < kMaxReprobeDelay; ++i) delay *= 2;
  return std::min(delay, kMaxReprobeDelay);
}

ElasticPolicy::ElasticPolicy(ElasticOptions options, std::vector<std::string> candidate_hosts)
    : options_(options), hosts_(std::move(candidate_hosts)), states_(hosts_.size(), NodeState::kSpare) {
  DSLAUNCH_CHECK(!hosts_.empty()) << "ElasticPolicy: no candidate node";
  DSLAUNCH_CHECK(options_.min_nodes >= 1 && options_.min_nodes <= options_.max_nodes)
      << "ElasticPolicy: bad node range " << options_.min_nodes << ":" << options_.max_nodes;
  DSLAUNCH_CHECK(options_.max_restarts >= 0) << "ElasticPolicy: max_restarts " << options_.max_restarts;
}

bool ElasticPolicy::restartable() const {
  return options_.max_restarts > 0 || options_.min_nodes < options_.max_nodes ||
         static_cast<int>(hosts_.size()) > options_.max_nodes;
}

NodeState ElasticPolicy::state(int node) const {
  CheckNode(node);
  return states_[node];
}

void ElasticPolicy::CheckNode(int node) const {
  DSLAUNCH_CHECK(node >= 0 && node < static_cast<int>(hosts_.size()))
      << "ElasticPolicy: node " << node << " is not a candidate (0.." << hosts_.size() - 1 << ")";
}

std::string ElasticPolicy::NodeList(const std::vector<int>& nodes) const {
  std::string list;
  for (int n : nodes) list += (list.empty() ? "" : ", ") + hosts_[n];
  return list;
}

std::string ElasticPolicy::Nodes(size_t count) {
  return std::to_string(count) + (count == 1 ? " node" : " nodes");
}

bool ElasticPolicy::AllRequired() const {
  return options_.min_nodes == options_.max_nodes && options_.max_nodes == static_cast<int>(hosts_.size());
}

std::string ElasticPolicy::TooFew(size_t left) const {
  if (AllRequired()) {
    return "the job needs all " + Nodes(hosts_.size()) + " and has no spare (--nnodes MIN:MAX lets it run on fewer)";
  }
  return "only " + Nodes(left) + " left and no spare, fewer than the minimum of " + std::to_string(options_.min_nodes);
}

std::string ElasticPolicy::Budget(bool counted) const {
  const std::string of = " of " + std::to_string(options_.max_restarts);
  if (counted) return "restart " + std::to_string(restarts_) + of;
  return "not counted as a restart: " + std::to_string(restarts_) + of + " used";
}

std::string ElasticPolicy::Describe(const GenerationOutcome& o) const {
  if (!o.description.empty()) return o.description;
  using Kind = GenerationOutcome::Kind;
  const std::string step = o.last_step >= 0 ? " at step " + std::to_string(o.last_step) : "";
  switch (o.kind) {
    case Kind::kSucceeded: return "every worker exited 0";
    case Kind::kWorkerFailed:
      return "rank " + std::to_string(o.rank) + " failed" + step + " (" + DescribeExitStatus(o.status) + ")";
    case Kind::kWorkerStalled:
      return "rank " + std::to_string(o.rank) + " reported no progress for its watchdog timeout" +
             (o.last_step >= 0 ? " (last step " + std::to_string(o.last_step) + ")" : " (no step reported)");
    case Kind::kNodesLost:
      return (o.lost_nodes.size() == 1 ? "node " : "nodes ") + NodeList(o.lost_nodes) + " lost";
    case Kind::kInterrupted: return "interrupted";
    case Kind::kStartupFailed:
      if (o.lost_nodes.empty()) return "start-up failed";
      return (o.lost_nodes.size() == 1 ? "node " : "nodes ") + NodeList(o.lost_nodes) + " did not start";
    case Kind::kRescale: return "stopped for a scale-up";
  }
  return "?";
}

ElasticPolicy::Membership ElasticPolicy::NextMembership() const {
  std::vector<int> spares;
  for (int n = 0; n < static_cast<int>(states_.size()); ++n) {
    if (states_[n] == NodeState::kSpare) spares.push_back(n);
  }
  size_t next_spare = 0;
  Membership m;
  for (int n : active_) {
    if (states_[n] != NodeState::kFailed) {
      m.nodes.push_back(n);
    } else if (next_spare < spares.size()) {
      // In the lost node's place: the nodes that stay keep their node ranks.
      m.nodes.push_back(spares[next_spare]);
      m.replaced.emplace_back(n, spares[next_spare++]);
    } else {
      m.dropped.push_back(n);
    }
  }
  while (static_cast<int>(m.nodes.size()) < options_.max_nodes && next_spare < spares.size()) {
    m.nodes.push_back(spares[next_spare]);
    m.added.push_back(spares[next_spare++]);
  }
  return m;
}

std::string ElasticPolicy::Changes(const Membership& m) const {
  std::string text;
  for (auto [lost, spare] : m.replaced) text += "; replacing " + hosts_[lost] + " with spare " + hosts_[spare];
  if (!m.dropped.empty()) text += "; no spare left";
  if (!m.added.empty()) text += "; adding " + NodeList(m.added);
  return text;
}

Decision ElasticPolicy::Start(const std::vector<int>& unreachable) {
  DSLAUNCH_CHECK(!started_) << "ElasticPolicy::Start called twice";
  started_ = true;
  for (int n : unreachable) {
    CheckNode(n);
    states_[n] = NodeState::kFailed;
  }
  std::vector<int> failed, spares;
  for (int n = 0; n < static_cast<int>(hosts_.size()); ++n) {
    if (states_[n] == NodeState::kFailed) {
      failed.push_back(n);
    } else if (static_cast<int>(active_.size()) < options_.max_nodes) {
      active_.push_back(n);
      states_[n] = NodeState::kActive;
    } else {
      spares.push_back(n);
    }
  }
  const std::string head = "dslaunch: generation 0: ";
  const std::string unreachable_text = failed.empty() ? "" : "unreachable: " + NodeList(failed);
  if (static_cast<int>(active_.size()) < options_.min_nodes) {
    Decision d;
    d.kind = Decision::Kind::kFail;
    d.line = head + std::to_string(active_.size()) + " of " + Nodes(hosts_.size()) + " reachable (" + unreachable_text +
             "); " +
             (AllRequired() ? "the job needs all of them (--nnodes MIN:MAX lets it run on fewer)"
                            : "the job needs at least " + std::to_string(options_.min_nodes)) +
             "; stopping the job";
    return d;
  }
  running_ = true;
  Decision d;
  d.kind = Decision::Kind::kRun;
  d.active = active_;
  d.line = head + "running on " + Nodes(active_.size());
  if (!spares.empty()) d.line += "; spares: " + NodeList(spares);
  if (!failed.empty()) d.line += "; " + unreachable_text + " (probed again)";
  history_.push_back(GenerationRecord{0, active_, false, {}, {}});
  return d;
}

bool ElasticPolicy::RepeatsPrevious(const GenerationOutcome& o) const {
  using Kind = GenerationOutcome::Kind;
  if (o.kind != Kind::kWorkerFailed && o.kind != Kind::kWorkerStalled) return false;
  // An exit status alone is no evidence of a deterministic failure: a worker that reports neither
  // a step nor an error message may have hit a transient fault twice.
  if (o.last_step < 0 && o.error_message.empty()) return false;
  if (history_.size() < 2) return false;
  const GenerationRecord& previous = history_[history_.size() - 2];
  const GenerationOutcome& p = previous.outcome;
  return previous.nodes == history_.back().nodes && p.kind == o.kind && p.rank == o.rank && p.status == o.status &&
         p.error_message == o.error_message && p.last_step == o.last_step;
}

Decision ElasticPolicy::End(Decision::Kind kind, std::string line) {
  running_ = false;
  Decision d;
  d.kind = kind;
  d.line = std::move(line);
  history_.back().decision = d;
  return d;
}

Decision ElasticPolicy::Run(Membership next, bool counted, const std::string& head) {
  const bool same = next.nodes == active_;
  if (counted) ++restarts_;
  for (int n : next.nodes) states_[n] = NodeState::kActive;
  Decision d;
  d.kind = Decision::Kind::kRun;
  d.active = next.nodes;
  d.counted = counted;
  d.line = head + Changes(next) + (same ? "; restarting on the same " : "; continuing on ") + Nodes(next.nodes.size()) +
           " (" + Budget(counted) + ")";
  history_.back().decision = d;
  active_ = std::move(next.nodes);
  ++generation_;
  history_.push_back(GenerationRecord{generation_, active_, false, {}, {}});
  return d;
}

Decision ElasticPolicy::OnGenerationEnded(const GenerationOutcome& outcome) {
  DSLAUNCH_CHECK(running_) << "ElasticPolicy::OnGenerationEnded without a running generation";
  using Kind = GenerationOutcome::Kind;
  rescale_pending_ = false;
  GenerationRecord& record = history_.back();
  record.ended = true;
  record.outcome = outcome;
  record.outcome.description = Describe(outcome);
  const std::string head = "dslaunch: generation " + std::to_string(generation_) + ": " + record.outcome.description;
  const std::string stopping = "; stopping the job";
  auto exhausted = [&] {
    return End(Decision::Kind::kFail, head + (options_.max_restarts == 0
                                                  ? "; no restarts allowed (--max_restarts 0)"
                                                  : "; restart budget exhausted (" + std::to_string(restarts_) +
                                                        " of " + std::to_string(options_.max_restarts) + " used)") +
                                          stopping);
  };
  switch (outcome.kind) {
    case Kind::kSucceeded:
      return End(Decision::Kind::kFinish, head + "; the job is done");
    case Kind::kInterrupted:
      return End(Decision::Kind::kFinish, head + "; not restarting");
    case Kind::kWorkerFailed:
    case Kind::kWorkerStalled:
      if (RepeatsPrevious(outcome)) {
        return End(Decision::Kind::kStopRepeated,
                   head + "; the same failure as in generation " + std::to_string(generation_ - 1) +
                       " (same rank, exit status, message and step, on the same nodes): stopping early instead of "
                       "restarting (" +
                       std::to_string(restarts_) + " of " + std::to_string(options_.max_restarts) + " restarts used)");
      }
      if (restarts_ >= options_.max_restarts) return exhausted();
      return Run(NextMembership(), true, head);
    case Kind::kStartupFailed:
      if (outcome.lost_nodes.empty()) {
        return End(Decision::Kind::kFail, head + "; a start-up failure that names no node is not retried" + stopping);
      }
      [[fallthrough]];
    case Kind::kNodesLost: {
      DSLAUNCH_CHECK(!outcome.lost_nodes.empty()) << "ElasticPolicy: kNodesLost names no node";
      for (int n : outcome.lost_nodes) {
        CheckNode(n);
        states_[n] = NodeState::kFailed;
      }
      Membership next = NextMembership();
      if (static_cast<int>(next.nodes.size()) < options_.min_nodes) {
        return End(Decision::Kind::kFail, head + "; " + TooFew(next.nodes.size()) + stopping);
      }
      if (restarts_ >= options_.max_restarts) return exhausted();
      return Run(std::move(next), true, head);
    }
    case Kind::kRescale:
      return Run(NextMembership(), false, head);
  }
  DSLAUNCH_CHECK(false) << "ElasticPolicy: unknown outcome kind";
  return {};
}

std::optional<Decision> ElasticPolicy::OnNodeReturned(int node) {
  CheckNode(node);
  DSLAUNCH_CHECK(states_[node] == NodeState::kFailed)
      << "ElasticPolicy::OnNodeReturned: node " << node << " (" << hosts_[node] << ") is not failed";
  states_[node] = NodeState::kSpare;
  if (!running_ || rescale_pending_) return std::nullopt;
  Membership next = NextMembership();
  if (next.nodes.size() <= active_.size()) return std::nullopt;
  rescale_pending_ = true;
  Decision d;
  d.kind = Decision::Kind::kRescale;
  d.reason = "node " + hosts_[node] + " answers again; scaling up from " + std::to_string(active_.size()) + " to " +
             Nodes(next.nodes.size()) + " at the next step boundary (not counted as a restart)";
  d.line = "dslaunch: generation " + std::to_string(generation_) + ": " + d.reason;
  d.active = std::move(next.nodes);
  return d;
}

void ElasticPolicy::OnNodeUnreachable(int node) {
  CheckNode(node);
  DSLAUNCH_CHECK(states_[node] != NodeState::kActive)
      << "ElasticPolicy::OnNodeUnreachable: node " << node << " (" << hosts_[node]
      << ") is active; its loss ends the generation (kNodesLost)";
  states_[node] = NodeState::kFailed;
}

}  // namespace dslaunch::launcher
