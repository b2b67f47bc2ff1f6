// RunAgent: connect to the launcher, register, then run the session (agent/agent_session.h).
#include "agent/agent.h"

#include <unistd.h>

#include <iostream>

#include "agent/agent_session.h"
#include "agent/control/registration.h"
#include "common/endpoint/endpoint_client.h"
#include "common/exit_codes.h"
#include "dslaunch/config.h"

namespace dslaunch::agent {
namespace {

using Clock = std::chrono::steady_clock;

// How long the agent waits for its assignment once registered: in node mode until the membership
// is complete, at most its join timeout (the host waits as long for the others, plus its last call).
Clock::duration AssignmentTimeout(const AgentConfig& config) {
  if (config.slots > 0) return config.join_timeout;
  return kAssignmentTimeout;
}

control::Register RegisterMessage(const AgentConfig& config) {
  control::Register reg;
  reg.job_id = config.job_id;
  reg.node_rank = config.node_rank;
  reg.version = DSLAUNCH_VERSION;
  reg.host = config.host;
  reg.pid = ::getpid();
  reg.slots = config.slots;
  return reg;
}

}  // namespace

int RunAgent(const AgentConfig& config) {
  const bool node_mode = config.slots > 0;
  std::string prefix = "dslaunch-agent[" + (node_mode ? config.host : "node " + std::to_string(config.node_rank)) + "]: ";
  // In node mode the launcher may come up minutes after this node (pods start in any order).
  const auto connect_timeout = node_mode ? std::chrono::duration_cast<Clock::duration>(config.join_timeout)
                                         : std::chrono::duration_cast<Clock::duration>(kConnectTimeout);
  auto fd = ConnectToEndpoint(config.endpoint, config.job_id, config.secret, PeerRole::kAgent,
                              /*generation=*/0, Clock::now() + connect_timeout);
  if (!fd.ok()) {
    std::cerr << prefix << "cannot reach the launcher at " << config.endpoint << ": "
              << fd.status().ToString() << "\n";
    return node_mode ? kExitInfrastructure : kAgentStartupFailed;
  }
  // Where peer nodes send this node copies of their in-memory snapshots: listening before REGISTER,
  // which names it.
  auto replication = replica::SnapshotReplication::Start(config.endpoint, {config.job_id, config.secret, prefix});
  control::Register reg = RegisterMessage(config);
  if (replication.ok()) {
    reg.snapshot_address = (*replication)->address();
  } else {
    std::cerr << prefix << "in-memory snapshots are not copied to or from this node: "
              << replication.status().ToString() << "\n";
  }
  std::optional<int> released;
  std::string received;  // what the launcher sent right after the ASSIGNMENT
  auto assignment = Register(fd->get(), reg, AssignmentTimeout(config), released, &received);
  if (!assignment.ok()) {
    std::cerr << prefix << "registration failed: " << assignment.status().ToString() << "\n";
    if (!node_mode) return kAgentStartupFailed;
    if (released) return *released;
    // Refused (a taken node rank, a node too many, another version): the command line is wrong.
    return assignment.status().code() == StatusCode::kAborted ? kExitUsage : kExitInfrastructure;
  }
  AgentSession session(config, std::move(*assignment), std::move(*fd), std::move(received),
                       replication.ok() ? std::move(*replication) : nullptr);
  Status started = session.Start();
  if (!started.ok()) {
    std::cerr << prefix << "cannot start workers: " << started.ToString() << "\n";
    // Workers already started are stopped, and the private directory removed, before the launcher
    // hears of the failure (it may kill this agent as soon as it has). In node mode this is the
    // node's exit code: the infrastructure class, as the host reports the job (a scheduler's
    // podFailurePolicy cannot tell the agent's own code 3 from a rank's).
    session.ReleaseNode();
    session.ReportFailure(started);
    return node_mode ? kExitInfrastructure : kAgentStartupFailed;
  }
  return session.Run();
}

}  // namespace dslaunch::agent
