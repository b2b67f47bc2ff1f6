// The agent process's exit codes, and a node-mode agent's, which is what its scheduler sees.
#pragma once

#include <optional>

namespace dslaunch::agent {

// The exit code of a node-mode agent, which is its node's dslaunch process and what the scheduler
// sees (common/exit_codes.h): the job's code when the launcher sent it (RELEASE), else 128+N when
// signal N stopped the agent, else kExitInfrastructure (the launcher was lost or unreachable).
int NodeModeExitCode(std::optional<int> released_code, int stop_signal);

// Exit codes of the agent process.
inline constexpr int kAgentOk = 0;               // every worker ran and was reported
inline constexpr int kAgentWorkersFailed = 1;    // reported, but some worker failed or was stopped
inline constexpr int kAgentLostLauncher = 2;     // the control connection broke: workers were stopped
inline constexpr int kAgentStartupFailed = 3;    // could not connect, register or start

}  // namespace dslaunch::agent
