// ElasticPolicy: what the launcher does when a generation of the job ends (docs/elastic.md,
// "The restart policy"). Pure: no sockets, processes, clocks or files.
//
// The job runs as generations 0, 1, 2, ...; each runs on a set of candidate nodes (the hostfile's
// selected hosts, indexed 0..N-1 as Register.node_rank). Every candidate is active (in the current
// generation), a spare (healthy, waiting) or failed (lost; re-probed with ReprobeDelay).
//
// The I/O shell calls Start() once, then OnGenerationEnded() after every generation, and
// OnNodeReturned() / OnNodeUnreachable() when a re-probe or a spare's check answers:
//
//   Decision d = policy.Start(unreachable);
//   while (d.kind == Decision::Kind::kRun) {
//     run generation policy.generation() on d.active;      // OnNodeReturned may ask for kRescale
//     d = policy.OnGenerationEnded(outcome);
//   }
//   exit: kFinish with the last generation's code, kFail / kStopRepeated with the last failure's
//
// Rules (the table in docs/elastic.md):
//   succeeded, interrupted                   -> kFinish
//   worker failed or stalled                 -> kRun on the same nodes, counted; kStopRepeated when
//                                               it repeats the previous generation's failure
//   nodes lost (or never started)            -> mark them failed; replace each with a spare, else
//                                               shrink while >= min_nodes remain, else kFail; counted
//   start-up failed, no node to blame        -> kFail (the same start would fail the same way)
//   stopped for a scale-up (kRescale)        -> kRun with the spares added up to max_nodes, not counted
//   a counted event with the budget used up  -> kFail
// Every kRun fills the membership up to max_nodes from the spares. Restarts count failures only,
// never scale-ups. With max_restarts 0 and all candidates required (no range, no spares) the
// first failure is kFail: the one-shot job of before generations existed.
//
// Not thread-safe. Preconditions (node indices in range, calls in the order above) are checked
// with DSLAUNCH_CHECK: breaking them is a bug of the caller.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/exit_status.h"

namespace dslaunch::launcher {

// Re-probing a failed node: the first probe 1 s after it failed (a restarted agent or a link that
// flapped answers within a second or two), doubling after every failed probe up to 30 s (the
// issue's bound: a node that comes back waits at most that long to be noticed, and a dead one costs
// one connection attempt per 30 s).
inline constexpr std::chrono::milliseconds kFirstReprobeDelay{1000};
inline constexpr std::chrono::milliseconds kMaxReprobeDelay{30000};

// The wait before the next probe of a failed node after `failed_probes` (>= 0) probes in a row
// that got no answer: 1 s, 2 s, 4 s, ... at most kMaxReprobeDelay.
std::chrono::milliseconds ReprobeDelay(int failed_probes);

// Validated by the command line (launcher/cli/cli.h): 1 <= min_nodes <= max_nodes, max_restarts >= 0.
// Without an elastic range, min_nodes = max_nodes = the number of candidates.
struct ElasticOptions {
  int min_nodes = 1;
  int max_nodes = 1;
  int max_restarts = 0;
};

enum class NodeState { kActive, kSpare, kFailed };

// How a generation ended, from the launcher's JobTracker.
struct GenerationOutcome {
  enum class Kind {
    kSucceeded,      // every worker exited 0
    kWorkerFailed,   // a worker exited non-zero or died of a signal; its node's agent is healthy
    kWorkerStalled,  // a worker reported no progress for its watchdog timeout (WORKER_STALLED)
    kNodesLost,      // agents lost (connection, heartbeat timeout, killed, SSH session dead)
    kInterrupted,    // the launcher received SIGINT, SIGTERM or SIGHUP
    kStartupFailed,  // the generation never ran: lost_nodes are the nodes that did not start
                     // or register (treated as lost); none: a failure not tied to a node
    kRescale,        // stopped at a step boundary for the scale-up OnNodeReturned asked for
  };
  Kind kind = Kind::kSucceeded;
  std::vector<int> lost_nodes;  // candidate indices (kNodesLost: at least one; kStartupFailed)
  // The failed worker (kWorkerFailed, kWorkerStalled), for repeat detection: its rank, exit
  // status, error record message ("" without one) and last reported step (-1 if none).
  int rank = -1;
  ExitStatus status;
  std::string error_message;
  int64_t last_step = -1;
  // The root cause in one phrase for the decision line, e.g. "node 10.0.0.14 lost (no heartbeat
  // for 3.0 s)"; empty: the policy words one from the fields above.
  std::string description;
};

struct Decision {
  enum class Kind {
    kRun,           // run generation generation() on `active`
    kRescale,       // (OnNodeReturned only) stop the current generation at a step boundary, with
                    // save-on-stop, then report GenerationOutcome::kRescale
    kFinish,        // the job is over: succeeded, or interrupted
    kFail,          // the job is over: no restart possible (budget, too few nodes, start-up)
    kStopRepeated,  // the job is over: the same failure as in the previous generation
  };
  Kind kind = Kind::kFail;
  std::vector<int> active;  // kRun, kRescale: candidate indices of the next generation, node-rank order
  bool counted = false;     // this kRun used one restart of --max_restarts
  // One line for the console: "dslaunch: generation 3: node 10.0.0.14 lost (no heartbeat for
  // 3.0 s); no spare left; continuing on 3 nodes (restart 2 of 5)". A job that is not
  // restartable() need not print it: its summary says all, as before generations existed.
  std::string line;
  // kRescale: why the current generation stops, the line without its "dslaunch: generation N: "
  // (the root cause the job runner records, which the generation's end line repeats after that
  // prefix: "node b answers again; scaling up from 1 to 2 nodes ...").
  std::string reason;
};

// One generation, for the final summary.
struct GenerationRecord {
  int generation = 0;
  std::vector<int> nodes;  // candidate indices, node-rank order
  bool ended = false;      // false for the generation still running (or the job's last, if it
                           // never ended: the summary after a launcher fault)
  GenerationOutcome outcome;  // how it ended; description filled in (the policy's words if none)
  Decision decision;          // what followed it (its `active`: the next generation's nodes)
};

class ElasticPolicy {
 public:
  // `candidate_hosts`: every selected host, in hostfile order (non-empty, for the lines).
  ElasticPolicy(ElasticOptions options, std::vector<std::string> candidate_hosts);

  // Generation 0. `unreachable`: candidates that failed the pre-flight check; they are failed (to
  // be re-probed). The first max_nodes of the others, in candidate order, are active and the rest
  // spares: kRun. Fewer than min_nodes reachable: kFail. Call once, first.
  Decision Start(const std::vector<int>& unreachable = {});

  // The current generation ended. kRun: generation() is now the next one and `active` its nodes.
  // Anything else ends the job; no further call but the accessors.
  Decision OnGenerationEnded(const GenerationOutcome& outcome);

  // A failed node answered a re-probe: it becomes a spare. Returns kRescale (`active`: the nodes of
  // the bigger generation, not counted) when the job is running below max_nodes and no scale-up
  // is pending yet; nullopt otherwise (the node waits as a spare; a pending scale-up takes it).
  // Precondition: state(node) == kFailed.
  std::optional<Decision> OnNodeReturned(int node);

  // A spare failed a check, or a failed node another probe: it is (still) failed. Precondition:
  // state(node) != kActive (an active node's loss ends its generation: kNodesLost).
  void OnNodeUnreachable(int node);

  // The job may run another generation: max_restarts > 0, or an elastic range or spares
  // (min_nodes < max_nodes, or more candidates than max_nodes) that allow an uncounted one.
  // Assignment.restartable.
  bool restartable() const;
  // The generation running (or about to run after kRun); 0 before Start.
  int generation() const { return generation_; }
  // Counted restarts so far.
  int restarts() const { return restarts_; }
  NodeState state(int node) const;
  const std::vector<int>& active() const { return active_; }
  const std::vector<std::string>& hosts() const { return hosts_; }
  // One record per generation started, oldest first.
  const std::vector<GenerationRecord>& history() const { return history_; }

 private:
  // The next generation's nodes: the current ones, each failed one replaced in place by the
  // lowest spare (or dropped when none is left), then spares appended up to max_nodes.
  struct Membership {
    std::vector<int> nodes;
    std::vector<std::pair<int, int>> replaced;  // (failed node, its spare)
    std::vector<int> dropped;
    std::vector<int> added;
  };
  Membership NextMembership() const;
  // True when `outcome` repeats the failure that ended the previous generation, on the same nodes.
  bool RepeatsPrevious(const GenerationOutcome& outcome) const;
  Decision Run(Membership next, bool counted, const std::string& head);
  Decision End(Decision::Kind kind, std::string line);
  void CheckNode(int node) const;
  bool AllRequired() const;  // no range and no spare: every candidate must run
  std::string Describe(const GenerationOutcome& outcome) const;
  std::string Changes(const Membership& next) const;
  std::string TooFew(size_t left) const;
  std::string Budget(bool counted) const;
  std::string NodeList(const std::vector<int>& nodes) const;
  static std::string Nodes(size_t count);  // "1 node", "3 nodes"

  ElasticOptions options_;
  std::vector<std::string> hosts_;
  std::vector<NodeState> states_;
  std::vector<int> active_;
  int generation_ = 0;
  int restarts_ = 0;
  bool started_ = false;
  bool running_ = false;          // between Start's kRun and a decision that ends the job
  bool rescale_pending_ = false;  // OnNodeReturned asked for kRescale; OnGenerationEnded clears it
  std::vector<GenerationRecord> history_;
};

}  // namespace dslaunch::launcher
