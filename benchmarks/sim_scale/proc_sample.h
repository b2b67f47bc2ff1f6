// What the simulation reads of the launcher process from /proc: its own CPU time (utime + stime,
// threads included, children not) and its memory (VmRSS, VmHWM). Linux only.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace dslaunch::sim {

struct ProcSample {
  double cpu_seconds = 0;  // utime + stime
  int64_t rss_kb = 0;      // VmRSS
  int64_t hwm_kb = 0;      // VmHWM: the peak resident set so far
};

// Reads /proc/<pid>/stat and /proc/<pid>/status; fields it cannot read stay 0 (a zombie has CPU
// times but no memory).
ProcSample SampleProcess(pid_t pid);

// This process's own CPU time (getrusage), to show the simulator is not the bottleneck.
double OwnCpuSeconds();

}  // namespace dslaunch::sim
