// The edge of core binding: what the node offers, read from the kernel (the agent's CPU affinity,
// NUMA nodes and thread siblings in sysfs). The split itself is pure: agent/node/core_binding.h.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/node/core_binding.h"
#include "common/control_messages.h"
#include "common/status.h"

namespace dslaunch::agent {

// Where Linux describes CPUs (cpu/cpuN/topology) and NUMA nodes (node/nodeN/cpulist).
inline constexpr char kSysDevicesSystem[] = "/sys/devices/system";

// The CPUs this process may run on (sched_getaffinity), ascending. kInternal if the call fails.
Result<std::vector<int>> ReadOwnAffinity();

// The layout of `allowed` under `sys_root` (kSysDevicesSystem, or a fake tree in tests):
// NUMA nodes from sys_root/node/node<N>/cpulist, thread siblings from
// sys_root/cpu/cpu<N>/topology/thread_siblings_list. Missing files mean "unknown" (one memory
// domain; each CPU a core of its own), as in containers that hide sysfs; a file that exists but
// does not parse is kInternal naming it.
Result<CpuLayout> ReadCpuLayout(const std::string& sys_root, std::vector<int> allowed);

// Each worker's cores for this node's assignment, in the order of assignment.workers: {} when it
// does not ask for --bind_cores_to_rank (or has no worker); else ReadOwnAffinity,
// ReadCpuLayout(kSysDevicesSystem) and SplitCores of its bind_core_list (empty: the affinity).
// Errors are SplitCores's, or the reads'.
Result<std::vector<RankCores>> AssignedCores(const control::Assignment& assignment);

}  // namespace dslaunch::agent
