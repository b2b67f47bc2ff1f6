// The agent's private directory for the workers' secret file: its name, and the removal of
// directories left behind by agents that were killed before they could remove their own.
//
// Layout: RUNTIME_DIR/dslaunch-JOB-nNODE-PID/store.secret (directory 0700, file 0600), where PID
// is the agent's, and RUNTIME_DIR/dslaunch-JOB-nNODE-PID/pid_namespace, the agent's PID namespace
// ("pid:[4026531836]", as /proc/self/ns/pid reads). An agent removes its directory when it exits;
// one killed by SIGKILL cannot, so every agent first removes the directories of agents that no
// longer run (docs/security.md). A PID means something only in its own PID namespace: an agent in
// a container (or under `unshare --pid`) that shares the runtime directory with the host must not
// judge the host's agents by their numbers, nor they its.
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

// The file in a secret directory that names its agent's PID namespace.
inline constexpr char kPidNamespaceFile[] = "pid_namespace";

// The calling process's PID namespace, as /proc/self/ns/pid reads ("pid:[N]"); empty if unknown.
std::string OwnPidNamespace();

// Removes every directory in `runtime_dir` named by SecretDirName, owned by the calling user,
// whose agent process no longer runs (its pid is gone or now belongs to another program), unless
// its kPidNamespaceFile names another PID namespace than `own_pid_namespace` (there the pid
// says nothing). Best effort: returns how many were removed; directories it cannot inspect are
// left alone.
int RemoveStaleSecretDirs(const std::string& runtime_dir, const std::string& own_pid_namespace);

}  // namespace dslaunch::agent
