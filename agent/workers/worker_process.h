// Starting a worker process in its own process group, output on pipes (through SpawnProcess,
// common/spawn.h). The child
//  - becomes the leader of a new process group (so the agent can signal the worker and every
//    process it starts, and nothing else: no kill by name pattern),
//  - gets SIGKILL if the agent dies (PR_SET_PDEATHSIG), so a crashed agent leaves no worker,
//  - has stdin on /dev/null and stdout/stderr on two pipes read by the agent, and of the agent's
//    other descriptors only `inherited_fds`,
//  - runs in `working_dir` with exactly `env`, on `cpus` with memory on `memory_node` when given
//    (SpawnOptions::cpu_affinity, memory_node).
// If exec fails the child writes "dslaunch-agent: cannot execute 'PROG': REASON" to its stderr
// pipe and exits 127, as a shell does; the agent reports that like any other worker exit.
// Called only on the agent's single thread (PR_SET_PDEATHSIG follows the spawning thread).
#pragma once

#include <sys/types.h>

#include <csignal>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace dslaunch::agent {

struct ProcessLaunch {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  std::vector<std::string> env;   // "NAME=VALUE"
  std::string working_dir;        // empty: inherit
  std::vector<int> cpus;          // CPU affinity (--bind_cores_to_rank); empty: inherit
  std::optional<int> memory_node; // NUMA node to bind memory to; absent: inherit
  std::vector<int> inherited_fds; // kept by the worker under the same numbers (its snapshot memory)
};

struct SpawnedProcess {
  pid_t pid = -1;  // also the process group id
  UniqueFd stdout_fd;
  UniqueFd stderr_fd;
};

// Starts the process. Fails (kInternal) only if pipes or vfork fail; exec failures surface as
// exit code 127 of the child. The returned fds are non-blocking and close-on-exec.
Result<SpawnedProcess> SpawnInOwnProcessGroup(const ProcessLaunch& launch);

// Sends `signal` to the whole process group `pgid`. A group that no longer exists is not an error.
Status SignalProcessGroup(pid_t pgid, int signal);

// True while any process of the group `pgid` is alive (zombies included).
bool ProcessGroupExists(pid_t pgid);

}  // namespace dslaunch::agent
