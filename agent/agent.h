// dslaunch-agent: one per node. Connects to the launcher's endpoint, proves it holds the job
// secret, registers, receives its NodeAssignment and runs the node's workers until they have all
// exited or it is told to stop (docs/protocol.md, "Agent control messages"). What agent/main.cc
// needs: RunAgent and the agent's exit codes; the session itself is agent/agent_session.h.
#pragma once

#include <chrono>
#include <optional>

#include "agent/agent_config.h"

namespace dslaunch::agent {

// How long an agent keeps retrying to reach the launcher: the launcher is normally listening
// before any agent starts, but over SSH an agent may race a slow launcher start.
inline constexpr std::chrono::seconds kConnectTimeout{30};

// How long the agent waits for its assignment after registering.
inline constexpr std::chrono::seconds kAssignmentTimeout{60};

// The exit code of a node-mode agent, which is its node's dslaunch process and what the scheduler
// sees (common/exit_codes.h): the job's code when the launcher sent it (RELEASE), else 128+N when
// signal N stopped the agent, else kExitInfrastructure (the launcher was lost or unreachable).
int NodeModeExitCode(std::optional<int> released_code, int stop_signal);

// Exit codes of the agent process.
inline constexpr int kAgentOk = 0;               // every worker ran and was reported
inline constexpr int kAgentWorkersFailed = 1;    // reported, but some worker failed or was stopped
inline constexpr int kAgentLostLauncher = 2;     // the control connection broke: workers were stopped
inline constexpr int kAgentStartupFailed = 3;    // could not connect, register or start

// Runs the agent to completion and returns its exit code. Errors are printed to stderr prefixed
// with "dslaunch-agent[node N]".
int RunAgent(const AgentConfig& config);

}  // namespace dslaunch::agent
