// JobRunner: the launcher's I/O shell for one job. Hosts the endpoint (rendezvous store + agent
// control plane) for the whole job, checks and starts one agent per node through an AgentStarter,
// relays output to the console, exchanges heartbeats, and runs the job as generations
// (docs/elastic.md). The story of one generation:
//
//   1. The ElasticPolicy names its members (the candidates that are healthy).
//   2. Its plan is made; the store is fenced (workers of earlier generations are refused); agents
//      of earlier members that are not members now are released.
//   3. Each member's agent gets its ASSIGNMENT: one still connected at once, others when the agent
//      the launcher starts registers (within kRegistrationTimeout).
//   4. Every event (worker exits, lost agents, signals) goes to the generation's JobTracker; a
//      failure stops every member (STOP, the grace period, kStopReportMargin).
//   5. When the tracker is done, the policy decides: another generation (back to 1, on which
//      nodes), or the end: the summary, RELEASE to every agent, the launcher's exit code.
//
// Agents on healthy nodes stay connected across generations; failed nodes are re-probed and may
// come back. In node mode (RunNodeMode) a join phase comes first: the nodes that register make the
// candidates (the decisions are NodeMembership's, launcher/node_mode/membership.h).
// Single-threaded (one event loop); the starter's callbacks and the re-probes (on threads of their
// own) are posted onto it. The lifecycle is job_runner.cc; its parts (the agent fleet, the join
// phase, the status feed, the loop) are declared in job_runner_impl.h, each in its own file.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/endpoint/endpoint.h"
#include "common/heartbeat.h"
#include "common/stop_grace.h"  // kFailureStopGrace
#include "common/status.h"
#include "launcher/machine/connection_budget.h"
#include "launcher/job/console.h"
#include "launcher/elastic/elastic_policy.h"
#include "launcher/job/event_log.h"
#include "launcher/job/job_spec.h"
#include "launcher/plan/console_streams.h"
#include "launcher/plan/launch_plan.h"
#include "launcher/start/agent_starter.h"
#include "launcher/status/job_board.h"
#include "launcher/status/straggler_detector.h"

namespace dslaunch::launcher {

// How long every agent has to connect and register after the launcher starts it (SSH start-up
// on a busy node included).
inline constexpr std::chrono::seconds kRegistrationTimeout{60};
// After the grace period, how long the launcher still waits for agents to report their workers'
// exits before it gives up on them (SIGKILL already went out at the end of the grace period).
inline constexpr std::chrono::seconds kStopReportMargin{5};
// How long agents have to exit at the end of the job: kAgentExitWait and kAgentKillWait
// (launcher/job/agent_fleet.h).

struct JobRunnerOptions {
  std::string bind_address = "127.0.0.1";    // where the endpoint listens
  uint16_t port = 0;                          // 0: ephemeral
  // The endpoint's connection limit, sized from the plan (launcher/machine/connection_budget.h).
  size_t max_connections = kDefaultMaxEndpointConnections;
  // Node mode: what sized it (this node's --nproc_per_node on every node) and the descriptor
  // limit, to size it again from the nodes that joined before any worker starts.
  ConnectionDemand connections;
  uint64_t descriptor_limit = UINT64_MAX;
  std::string advertise_host = "127.0.0.1";  // default address agents use to reach it
  std::string agent_path;
  std::string agent_version;  // what `dslaunch-agent --version` must print on every node
  std::string log_dir;        // the job's log directory on every node
  std::string working_dir;
  std::chrono::milliseconds grace_period{0};
  std::chrono::milliseconds heartbeat_timeout{0};
  std::chrono::milliseconds heartbeat_interval = kHeartbeatInterval;
  // Which workers' lines the console shows (--tee, --redirects, --local_ranks_filter); agents send
  // none when it shows nothing.
  ConsoleStreams console;
  bool store_proxy = true;  // --store_proxy: agents proxy their workers' store traffic
  bool show_host = false;  // prefix output lines with the host (multi-node jobs)
  EventLog events;         // --events_file
  // Where the runner publishes its view of the job (launcher/status/job_status.h) and every output
  // line of a rank, for the status server (docs/observability.md), at most every
  // kBoardPublishInterval (launcher/job/status_feed.h). Null: nothing is published and no output
  // line is kept; the view is still kept for the straggler rule when stragglers.factor is above 0.
  std::shared_ptr<JobBoard> board;
  StragglerOptions stragglers;  // --straggler_factor, --straggler_window (with a board)
};

class JobRunner {
 public:
  JobRunner(JobRunnerOptions options, std::string job_id, std::string secret,
            AgentStarter& starter, Console& console);
  ~JobRunner();

  // Binds the endpoint; afterwards port() is valid.
  Status Listen();
  uint16_t port() const;
  // Runs the job to the end and returns the launcher's exit code: pre-flight on every candidate
  // (a failure prints one report and returns 1 with nothing started), then the agents, then the
  // generations until the policy ends the job. Precondition: Listen() succeeded.
  int Run(const JobSpec& spec);
  // Node mode: waits for the others to join (at least min_nodes within join_timeout; then up to
  // max_nodes, or last_call_timeout longer), numbers them (NodeMembership), then runs the job as
  // Run() does, the starter starting node 0's agent (this node's) and expecting the others', which
  // are already connected. Every agent gets the job's exit code at the end (RELEASE). Returns it;
  // kExitInfrastructure when too few nodes joined. Precondition: Listen() succeeded.
  int RunNodeMode(const NodeModeSpec& spec);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dslaunch::launcher
