// dslaunch-agent: one per node. Connects to the launcher's endpoint, proves it holds the job
// secret, registers, receives its NodeAssignment and runs the node's workers until they have all
// exited or it is told to stop (docs/protocol.md, "Agent control messages"). What agent/main.cc
// needs: RunAgent and the agent's exit codes (agent/exit_codes.h); the session itself is agent/agent_session.h.
#pragma once

#include <chrono>

#include "agent/agent_config.h"
#include "agent/exit_codes.h"

namespace dslaunch::agent {

// How long an agent keeps retrying to reach the launcher: the launcher is normally listening
// before any agent starts, but over SSH an agent may race a slow launcher start.
inline constexpr std::chrono::seconds kConnectTimeout{30};

// How long the agent waits for its assignment after registering.
inline constexpr std::chrono::seconds kAssignmentTimeout{60};

// Runs the agent to completion and returns its exit code. Errors are printed to stderr prefixed
// with "dslaunch-agent[node N]".
int RunAgent(const AgentConfig& config);

}  // namespace dslaunch::agent
