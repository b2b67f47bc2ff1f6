// How many CPUs this process may run on: its affinity mask (a cgroup, taskset or a scheduler's
// binding narrows it), else the online CPUs; at least 1. Read at the edge (each binary's main).
#pragma once

#include <sched.h>
#include <unistd.h>

#include <algorithm>

namespace dslaunch {

inline int UsableCpuCount() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
}

}  // namespace dslaunch
