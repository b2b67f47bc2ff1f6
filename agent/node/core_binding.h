// --bind_cores_to_rank: which CPUs each local rank of a node gets (docs/launch-plan.md, "Core
// binding"). DeepSpeed's rule (deepspeed/utils/numa.py): the usable cores, in order, are cut
// into local_world_size equal runs of floor(cores / local_world_size); rank i takes run i, the
// remainder stays unused, and OMP_NUM_THREADS is the run's length. A rank whose cores all lie in
// one NUMA node of a multi-node machine has its memory bound to that node. Pure: the node's
// layout is an input (agent/node/cpu_topology.h reads it).
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "common/status.h"

namespace dslaunch::agent {

// What a node offers, as the agent sees it.
struct CpuLayout {
  std::vector<int> allowed;  // the agent's CPU affinity (sched_getaffinity), ascending
  // NUMA node id -> its CPUs, ascending. Empty (unknown) or one entry: a single memory domain.
  std::map<int, std::vector<int>> numa_nodes;
  // CPU -> the first CPU of its physical core (the lowest of its thread siblings); a CPU missing
  // here is a core of its own.
  std::map<int, int> core_of;
};

// One local rank's share.
struct RankCores {
  std::vector<int> cpus;          // ascending, never empty
  std::optional<int> numa_node;   // bind memory here; absent: leave the memory policy alone
  friend bool operator==(const RankCores&, const RankCores&) = default;
};

// The usable cores of a node, in the order they are cut:
//  - with `core_list` (--bind_core_list, parsed): the list as given (every CPU in it must be in
//    layout.allowed; hardware threads are the user's choice);
//  - without: one hardware thread per physical core of layout.allowed (its lowest allowed
//    thread), grouped by NUMA node in node order, ascending within a node, so that equal runs
//    stay inside a node where they can (DeepSpeed counts physical cores too: psutil's
//    cpu_count(logical=False)). CPUs of no known node come last.
// kInvalidArgument, naming the option and the CPUs, for a listed CPU outside the affinity.
Result<std::vector<int>> UsableCores(const CpuLayout& layout, const std::optional<std::vector<int>>& core_list);

// Splits the usable cores between `local_world_size` ranks (index = local rank). numa_node is set
// when layout.numa_nodes has more than one node and every CPU of the rank lies in one of them.
// kInvalidArgument when there are fewer usable cores than ranks, naming the option, the counts
// and the cores ("--bind_cores_to_rank: 3 local ranks but 2 usable cores (0-1)"); precondition:
// local_world_size >= 1.
Result<std::vector<RankCores>> SplitCores(const CpuLayout& layout, const std::optional<std::vector<int>>& core_list,
                                          int local_world_size);

}  // namespace dslaunch::agent
