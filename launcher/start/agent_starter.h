// AgentStarter: the launcher's seam for starting one dslaunch-agent per node.
//
// Implementations: LocalAgentStarter (fork/exec on this machine, single-node jobs) and
// SshAgentStarter (libssh, launcher/start/ssh/agent_starter.h). Either way the job secret travels on the
// agent's stdin, never on its command line, and the agent is started with AgentArgv(...).
//
// Threading: Preflight and Start are called on the launcher's thread. The callbacks an agent's
// transport reports through (AgentCallbacks) may be called on any thread, at most once for
// on_exit, and never after the AgentHandle has been destroyed.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/exit_codes.h"
#include "common/exit_status.h"
#include "common/status.h"
#include "launcher/plan/launch_plan.h"

namespace dslaunch::launcher {

// The agent's command line, the same for every way of starting it. The endpoint host is the
// address agents use to reach the launcher; a starter may replace it per node with the address
// it knows the node can reach (SSH: the launcher's end of that node's connection).
struct AgentCommand {
  std::string agent_path;     // absolute path of dslaunch-agent on the node
  std::string endpoint_host;  // default address of the launcher's endpoint
  uint16_t endpoint_port = 0;
  std::string job_id;
  int node_rank = 0;  // node mode: the rank asked for, -1 for one by arrival
  // Node mode (docs/node-mode.md): the agent joins the rendezvous with this many workers.
  struct Join {
    int slots = 1;
    std::chrono::seconds timeout{0};
  };
  std::optional<Join> join;
  // How a node-mode agent writes the job's exit class at its exit (--exit_codes); the default is
  // left off the command line.
  ExitCodeScheme exit_codes = ExitCodeScheme::kClasses;
};

// "host:port" with IPv6 literals bracketed.
std::string JoinHostPort(const std::string& host, uint16_t port);

// The agent's argv for `command` with the endpoint at `endpoint_host`.
std::vector<std::string> AgentArgv(const AgentCommand& command, const std::string& endpoint_host);

// What pre-flight checks on every node before anything starts.
struct PreflightChecks {
  std::string agent_path;       // must be executable and report kAgentVersion
  std::string agent_version;    // expected `dslaunch-agent --version` output, e.g. "dslaunch-agent 0.1.0"
  std::string working_directory;  // must exist
};

// A node that failed pre-flight, and why (one line).
struct PreflightFailure {
  int node_rank = 0;
  std::string host;
  std::string reason;
};

// Reports from an agent's transport (any thread).
struct AgentCallbacks {
  // A line the agent process wrote on its stdout or stderr (start-up errors, mostly), without
  // its newline.
  std::function<void(std::string line)> on_output;
  // The agent process (for SSH: its remote command) ended, with its exit status when known.
  std::function<void(std::optional<ExitStatus> status, std::string detail)> on_exit;
};

// A started agent. Destroying the handle stops reporting; it does not stop the agent.
class AgentHandle {
 public:
  virtual ~AgentHandle() = default;
  // Ends the agent forcibly (SIGKILL for a local agent; a KILL signal request and closing the
  // channel for SSH). For the last resort only: normally agents exit after AGENT_DONE.
  virtual void Kill() = 0;
};

class AgentStarter {
 public:
  virtual ~AgentStarter() = default;
  // Checks every node in parallel: reachable, authenticates, agent present with the same
  // version, working directory exists. OK, or kFailedPrecondition with one report that lists
  // every failing node and its reason, one per line. Starts nothing.
  virtual Status Preflight(const std::vector<NodePlan>& nodes, const PreflightChecks& checks) = 0;
  // Like Preflight, for a job that can run without some of its nodes (an elastic range): the nodes
  // that pass are made ready as Preflight makes them, and the ones that fail are returned, sorted
  // by node rank, instead of failing the call. An error only for what fails every node (bad
  // options). The default checks each node with Preflight on its own.
  virtual Result<std::vector<PreflightFailure>> PreflightEach(const std::vector<NodePlan>& nodes,
                                                              const PreflightChecks& checks);
  // Starts the agent of `node` with the secret on its stdin.
  virtual Result<std::unique_ptr<AgentHandle>> Start(const NodePlan& node, const AgentCommand& command,
                                                     std::string_view secret, AgentCallbacks callbacks) = 0;
};

// Starts agents as children of the launcher on this machine. Preflight checks the agent binary
// and the working directory locally.
class LocalAgentStarter : public AgentStarter {
 public:
  // `agent_open_files_limit`: the soft RLIMIT_NOFILE agents (and so their workers) start with;
  // nullopt keeps the launcher's own (launcher/machine/open_files_limit.h).
  explicit LocalAgentStarter(std::optional<uint64_t> agent_open_files_limit = std::nullopt)
      : agent_open_files_limit_(agent_open_files_limit) {}
  Status Preflight(const std::vector<NodePlan>& nodes, const PreflightChecks& checks) override;
  Result<std::unique_ptr<AgentHandle>> Start(const NodePlan& node, const AgentCommand& command,
                                             std::string_view secret, AgentCallbacks callbacks) override;

 private:
  std::optional<uint64_t> agent_open_files_limit_;
};

}  // namespace dslaunch::launcher
