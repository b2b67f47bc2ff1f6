// The agent's private directory for the workers' secret file: its name, and the removal of
// directories left behind by agents that were killed before they could remove their own.
//
// Layout: RUNTIME_DIR/dslaunch-JOB-nNODE-PID/store.secret (directory 0700, file 0600), where PID
// is the agent's. An agent removes its directory when it exits; one killed by SIGKILL cannot, so
// every agent first removes the directories of agents that no longer run (docs/security.md).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace dslaunch::agent {

// "dslaunch-JOB-nNODE-PID".
std::string SecretDirName(std::string_view job_id, int node_rank, pid_t agent_pid);

// The agent pid of a name made by SecretDirName, or nullopt for any other name. Pure.
std::optional<pid_t> SecretDirAgentPid(std::string_view name);

// Removes every directory in `runtime_dir` named by SecretDirName, owned by the calling user,
// whose agent process no longer runs (its pid is gone or now belongs to another program).
// Best effort: returns how many were removed; directories it cannot inspect are left alone.
int RemoveStaleSecretDirs(const std::string& runtime_dir);

}  // namespace dslaunch::agent
