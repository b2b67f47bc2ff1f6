// How much memory this process may still use: the smaller of the machine's MemAvailable and the
// room left under the memory limits of its cgroup and the cgroups above it (v1 or v2). Read once
// at dslaunch-worker's edge and passed to CheckMemoryFits (runtime/train/memory_estimate.h); the
// parsers are pure and take the files' text.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "runtime/train/memory_estimate.h"

namespace dslaunch::runtime {

// MemAvailable of /proc/meminfo in bytes; nullopt when absent or malformed.
std::optional<double> ParseMemAvailable(std::string_view meminfo);

// The memory cgroup directories of /proc/self/cgroup, relative to the hierarchy's root, with
// whether each is v2 ("0::/a/b") or v1 (a line whose controllers include "memory").
struct CgroupPath {
  std::string path;
  bool v2 = false;
};
std::vector<CgroupPath> ParseMemoryCgroups(std::string_view proc_self_cgroup);

// Room under one cgroup's limit: limit - usage in bytes; nullopt for no limit ("max" in v2, or
// v1's "unlimited" value, any limit from 2^60 bytes up) or unreadable text.
std::optional<double> CgroupRoom(std::string_view limit_text, std::string_view usage_text);

// VmHWM of /proc/self/status (the process's peak resident set) in bytes; nullopt when absent or
// malformed.
std::optional<double> ParsePeakResident(std::string_view proc_self_status);
// This process's VmHWM; an error when /proc/self/status cannot be read or has none.
Result<double> ReadPeakResident();

// The rank's compute threads: OpenMP's (OMP_NUM_THREADS, else `cpus`) and OpenBLAS's own pool
// (OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS, else `cpus`), counted apart since the pthread
// build of OpenBLAS keeps its own threads. A value that is not a positive number counts as unset.
int ComputeThreads(const std::map<std::string, std::string>& env, int cpus);

// What the memory estimate needs from outside the config: the compute threads (ComputeThreads with
// the CPUs this process may run on) and the data files' sizes (a file that cannot be stat'ed
// counts 0: reading it fails later with its own error).
ProcessFootprint ReadProcessFootprint(const TrainConfig& config, const std::map<std::string, std::string>& env);

// Reads /proc/meminfo and the cgroup files (v2 under /sys/fs/cgroup or /sys/fs/cgroup/unified,
// v1 under /sys/fs/cgroup/memory), walking from this process's cgroup up to the root. Fails only
// when MemAvailable cannot be read.
Result<AvailableMemory> ReadAvailableMemory();

}  // namespace dslaunch::runtime
