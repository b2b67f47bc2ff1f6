#include "agent/node/core_binding.h"

#include <algorithm>
#include <set>

#include "common/check.h"
#include "common/cpu_list.h"

namespace dslaunch::agent {
namespace {

// The NUMA node holding every CPU of `cpus`, if one does.
std::optional<int> NodeHolding(const std::map<int, std::vector<int>>& nodes, const std::vector<int>& cpus) {
  for (const auto& [node, node_cpus] : nodes) {
    if (std::includes(node_cpus.begin(), node_cpus.end(), cpus.begin(), cpus.end())) return node;
  }
  return std::nullopt;
}

}  // namespace

Result<std::vector<int>> UsableCores(const CpuLayout& layout, const std::optional<std::vector<int>>& core_list) {
  const std::set<int> allowed(layout.allowed.begin(), layout.allowed.end());
  if (core_list) {
    std::vector<int> outside;
    for (int cpu : *core_list) {
      if (!allowed.contains(cpu)) outside.push_back(cpu);
    }
    if (!outside.empty()) {
      return InvalidArgumentError("--bind_core_list '" + FormatCpuList(*core_list) + "': CPU" +
                                  (outside.size() == 1 ? " " : "s ") + FormatCpuList(outside) +
                                  " outside the agent's CPU affinity (" + FormatCpuList(layout.allowed) +
                                  ") on this node; list only CPUs of that set");
    }
    return *core_list;
  }
  // One thread per physical core: the lowest allowed thread of each core.
  std::set<int> cores_seen;
  std::vector<int> physical;
  for (int cpu : layout.allowed) {
    auto core = layout.core_of.find(cpu);
    if (cores_seen.insert(core == layout.core_of.end() ? cpu : core->second).second) physical.push_back(cpu);
  }
  // Grouped by NUMA node, in node order; CPUs of no known node last.
  std::vector<int> ordered;
  std::set<int> placed;
  for (const auto& [node, node_cpus] : layout.numa_nodes) {
    for (int cpu : physical) {
      if (std::binary_search(node_cpus.begin(), node_cpus.end(), cpu) && placed.insert(cpu).second) {
        ordered.push_back(cpu);
      }
    }
  }
  for (int cpu : physical) {
    if (!placed.contains(cpu)) ordered.push_back(cpu);
  }
  return ordered;
}

Result<std::vector<RankCores>> SplitCores(const CpuLayout& layout, const std::optional<std::vector<int>>& core_list,
                                          int local_world_size) {
  DSLAUNCH_CHECK(local_world_size >= 1) << "SplitCores needs at least one rank, got " << local_world_size;
  DSLAUNCH_ASSIGN_OR_RETURN(std::vector<int> usable, UsableCores(layout, core_list));
  const size_t ranks = static_cast<size_t>(local_world_size);
  if (usable.size() < ranks) {
    std::vector<int> sorted = usable;
    std::sort(sorted.begin(), sorted.end());
    const std::string option =
        core_list ? "--bind_core_list '" + FormatCpuList(*core_list) + "'" : std::string("--bind_cores_to_rank");
    return InvalidArgumentError(
        option + ": " + std::to_string(ranks) + " local ranks but " + std::to_string(usable.size()) + " usable core" +
        (usable.size() == 1 ? "" : "s") + " (" + FormatCpuList(sorted) + (core_list ? "" : ", one thread per core") +
        ") on this node; each rank needs at least one: run fewer ranks per node or give more cores");
  }
  const size_t per_rank = usable.size() / ranks;
  std::vector<RankCores> out(ranks);
  for (size_t r = 0; r < ranks; ++r) {
    out[r].cpus.assign(usable.begin() + static_cast<std::ptrdiff_t>(r * per_rank),
                       usable.begin() + static_cast<std::ptrdiff_t>((r + 1) * per_rank));
    std::sort(out[r].cpus.begin(), out[r].cpus.end());
    if (layout.numa_nodes.size() > 1) out[r].numa_node = NodeHolding(layout.numa_nodes, out[r].cpus);
  }
  return out;
}

}  // namespace dslaunch::agent
