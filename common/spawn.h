// SpawnProcess: the one place in dslaunch that creates processes (fork/exec).
//
// It uses vfork: the parent is suspended only until the child has exec'd, and no page tables are
// copied, which makes starting 8 workers about twice as fast as fork on a 2-core VM
// (docs/benchmarks.md). The child runs only system calls between vfork and exec; signals are
// blocked around vfork so that no handler of the parent runs in the child.
//
// The child inherits only stdin, stdout, stderr and SpawnOptions::inherited_fds: every other
// descriptor is made close-on-exec in the child before exec, whatever flags the parent opened it
// with.
//
// CPU affinity and the NUMA memory policy are set with raw system calls in the child, which
// keeps them to the child: both are per-task, and a vfork child is a task of its own.
//
// If exec fails, the child writes "<exec_error_prefix>cannot execute 'PROG': REASON" to its
// stderr and exits 127, as a shell does; the caller sees an ordinary exit.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace dslaunch {

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  // "NAME=VALUE" strings; nullopt: inherit the caller's environment.
  std::optional<std::vector<std::string>> env;
  std::string working_dir;          // empty: inherit
  bool new_process_group = false;   // the child leads a new process group (pgid = pid)
  bool kill_with_parent = false;    // PR_SET_PDEATHSIG(SIGKILL): the child dies with its parent
  int stdin_fd = -1;                // -1: /dev/null
  int stdout_fd = -1;               // -1: inherit
  int stderr_fd = -1;               // -1: inherit
  std::string exec_error_prefix;    // e.g. "dslaunch-agent: "
  // Descriptors the child keeps, under the same numbers (each above stderr, open in the parent):
  // the agent's snapshot memory for its worker (docs/elastic.md, "Snapshots in memory").
  std::vector<int> inherited_fds;
  // Sets the child's soft RLIMIT_NOFILE before exec (at most the hard limit): the launcher raises
  // its own for its endpoint and gives its children back the limit it started with.
  std::optional<uint64_t> soft_open_files_limit;
  // The CPUs the child may run on (sched_setaffinity before exec, kept across it); empty:
  // inherit. Each below kMaxCpuId (common/cpu_list.h). If the kernel refuses the set, the child
  // writes "<prefix>cannot bind to CPUs LIST: REASON" to its stderr and exits 127.
  std::vector<int> cpu_affinity;
  // Binds the child's memory to this NUMA node (set_mempolicy MPOL_BIND, as numactl -m does);
  // absent: inherit. Best effort: where the kernel refuses (a container without CAP_SYS_NICE under
  // Docker's seccomp profile), the child writes a warning to its stderr and runs unbound.
  std::optional<int> memory_node;
};

// What RunAndReadOutput saw of a program that ran to its end (or was killed at its deadline).
struct ProgramOutput {
  std::string output;     // its stdout (and stderr, when asked), up to the byte limit
  bool timed_out = false;  // it had not closed its output by the deadline and was killed
  int exit_code = -1;      // its exit status; -1 when a signal ended it
  int signal = 0;          // the signal that ended it; 0 when it exited
};

// Runs `options` (its stdout, and its stderr when `with_stderr`, replaced by a pipe) and reads
// the output to its end, keeping at most `max_bytes`; kills the program with SIGKILL when it has
// not closed its output within `timeout`; then reaps it. Fails only where it cannot start it
// (SpawnProcess's errors, or no pipe).
Result<ProgramOutput> RunAndReadOutput(SpawnOptions options, std::chrono::milliseconds timeout, size_t max_bytes,
                                       bool with_stderr);

// Starts the process and returns its pid. Fails (kInvalidArgument) for an empty argv and
// (kInternal) if vfork fails. The fds in `options` stay owned by the caller.
Result<pid_t> SpawnProcess(const SpawnOptions& options);

}  // namespace dslaunch
