#include "agent/node/cpu_topology.h"

#include <sched.h>

#include <cerrno>
#include <charconv>
#include <filesystem>
#include <memory>

#include "common/cpu_list.h"
#include "common/file_io.h"

namespace dslaunch::agent {
namespace {

constexpr std::string_view kNodePrefix = "node";

// The CPU list in `path`; nullopt when the file does not exist.
Result<std::optional<std::vector<int>>> ReadListFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<std::vector<int>>();
  DSLAUNCH_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  auto cpus = ParseCpuList(text);
  if (!cpus.ok()) return InternalError(path + ": " + cpus.status().message());
  return std::optional<std::vector<int>>(std::move(*cpus));
}

}  // namespace

Result<std::vector<int>> ReadOwnAffinity() {
  const size_t bytes = CPU_ALLOC_SIZE(kMaxCpuId);
  auto free_set = [](cpu_set_t* s) { CPU_FREE(s); };
  std::unique_ptr<cpu_set_t, decltype(free_set)> set(CPU_ALLOC(kMaxCpuId), free_set);
  if (!set) return InternalError("cannot allocate a CPU set");
  if (::sched_getaffinity(0, bytes, set.get()) != 0) return ErrnoError("sched_getaffinity", errno);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < kMaxCpuId; ++cpu) {
    if (CPU_ISSET_S(cpu, bytes, set.get())) cpus.push_back(cpu);
  }
  return cpus;
}

Result<CpuLayout> ReadCpuLayout(const std::string& sys_root, std::vector<int> allowed) {
  CpuLayout layout;
  layout.allowed = std::move(allowed);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(sys_root + "/node", ec)) {
    const std::string name = entry.path().filename().string();
    int node = 0;
    const char* digits = name.data() + kNodePrefix.size();
    const char* end = name.data() + name.size();
    if (!name.starts_with(kNodePrefix) || digits == end) continue;  // "online", "possible", "has_cpu", ...
    if (auto [ptr, ec] = std::from_chars(digits, end, node); ec != std::errc() || ptr != end) continue;
    DSLAUNCH_ASSIGN_OR_RETURN(auto cpus, ReadListFile(entry.path().string() + "/cpulist"));
    if (cpus) layout.numa_nodes[node] = std::move(*cpus);
  }
  for (int cpu : layout.allowed) {
    const std::string path = sys_root + "/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list";
    DSLAUNCH_ASSIGN_OR_RETURN(auto siblings, ReadListFile(path));
    if (siblings && !siblings->empty()) layout.core_of[cpu] = siblings->front();
  }
  return layout;
}

Result<std::vector<RankCores>> AssignedCores(const control::Assignment& assignment) {
  if (!assignment.bind_cores_to_rank || assignment.workers.empty()) return std::vector<RankCores>{};
  DSLAUNCH_ASSIGN_OR_RETURN(std::vector<int> allowed, ReadOwnAffinity());
  DSLAUNCH_ASSIGN_OR_RETURN(CpuLayout layout, ReadCpuLayout(kSysDevicesSystem, std::move(allowed)));
  std::optional<std::vector<int>> list;
  if (!assignment.bind_core_list.empty()) list = assignment.bind_core_list;
  return SplitCores(layout, list, static_cast<int>(assignment.workers.size()));
}

}  // namespace dslaunch::agent
