#include "launcher/elastic/generation_outcome.h"

#include <algorithm>

#include "common/text.h"

namespace dslaunch::launcher {

std::string DescribeRootCause(const RootCause& cause) {
  using Kind = RootCause::Kind;
  switch (cause.kind) {
    case Kind::kWorkerFailed:
      return "rank " + std::to_string(cause.rank) + " on host " + cause.host + " exited with " +
             DescribeExitStatus(cause.status);
    case Kind::kWorkerStalled:
      return "rank " + std::to_string(cause.rank) + " on host " + cause.host + " reported no progress for " +
             FormatSeconds(std::chrono::milliseconds(cause.silence_ms));
    case Kind::kAgentLost:
      return "node " + cause.host + " lost (" + cause.message + ")";
    case Kind::kAgentStopped:
      return "the agent on " + cause.host + " stopped its workers (" + cause.message + ")";
    case Kind::kAgentFailed:
      return "node " + cause.host + " failed (" + cause.message + ")";
    case Kind::kSignal:
    case Kind::kStartupFailed:
    case Kind::kRescale:
      return cause.message;
  }
  return cause.message;
}

GenerationOutcome OutcomeOf(const JobTracker& tracker, const std::vector<int>& members,
                            const std::vector<int>& gone) {
  using Kind = GenerationOutcome::Kind;
  GenerationOutcome out;
  const auto& cause = tracker.root_cause();
  if (!cause) {
    out.kind = Kind::kSucceeded;
    return out;
  }
  out.description = DescribeRootCause(*cause);
  switch (cause->kind) {
    case RootCause::Kind::kSignal:
      out.kind = Kind::kInterrupted;
      return out;
    case RootCause::Kind::kRescale:
      out.kind = Kind::kRescale;
      return out;
    case RootCause::Kind::kStartupFailed:
      out.kind = Kind::kStartupFailed;
      for (size_t r = 0; r < members.size(); ++r) {
        if (!tracker.agent_registered(static_cast<int>(r))) out.lost_nodes.push_back(members[r]);
      }
      for (int c : gone) out.lost_nodes.push_back(c);
      std::sort(out.lost_nodes.begin(), out.lost_nodes.end());
      out.lost_nodes.erase(std::unique(out.lost_nodes.begin(), out.lost_nodes.end()), out.lost_nodes.end());
      return out;
    default:
      break;
  }
  if (!gone.empty()) {
    out.kind = Kind::kNodesLost;
    out.lost_nodes = gone;
    return out;
  }
  out.kind = cause->kind == RootCause::Kind::kWorkerStalled ? Kind::kWorkerStalled : Kind::kWorkerFailed;
  out.rank = cause->rank;
  out.status = cause->kind == RootCause::Kind::kWorkerStalled ? ExitStatus::Signaled(9) : cause->status;
  if (cause->error) {
    out.error_message = cause->error->message;
  } else if (!cause->stderr_tail.empty()) {
    out.error_message = cause->stderr_tail.back();  // a traceback's last line names the exception
  }
  out.last_step = cause->last_step;
  return out;
}

std::string FormatGenerationHistory(const ElasticPolicy& policy) {
  std::string s;
  for (const GenerationRecord& g : policy.history()) {
    s += "dslaunch: generation " + std::to_string(g.generation) + " on ";
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (i > 0) s += ", ";
      s += policy.hosts()[static_cast<size_t>(g.nodes[i])];
    }
    s += ": ";
    if (!g.ended) {
      s += "did not end";
    } else if (g.outcome.kind == GenerationOutcome::Kind::kSucceeded) {
      s += "succeeded";
    } else {
      s += g.outcome.description;
    }
    s += "\n";
  }
  return s;
}

}  // namespace dslaunch::launcher
