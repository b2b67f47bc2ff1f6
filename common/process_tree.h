// Finding and stopping every process a job started, including those that left its process group
// or its session (`setsid`, a daemon's double fork).
//
// Process groups are not enough: a worker's child that calls setsid() leaves the group, and
// signalling the group no longer reaches it. So the agent (and the launcher, for the agents it
// starts locally) marks itself a child subreaper (PR_SET_CHILD_SUBREAPER): an orphaned descendant
// is re-parented to it instead of to init, and stays in its process tree, where
// SignalDescendants finds it by walking /proc. See docs/launcher.md, "No orphans".
//
// DescendantsOf is pure; the rest reads /proc or sends signals.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace dslaunch {

// One line of the process table: who is whose parent, and whether it is a zombie (already dead,
// waiting to be reaped; it cannot be signalled and holds nothing but its table entry).
struct ProcessEntry {
  pid_t pid = 0;
  pid_t parent = 0;
  pid_t group = 0;  // process group id
  bool zombie = false;
  char state = 0;  // /proc/PID/stat's state: 'R' running, 'S' sleeping, 'D' disk sleep, 'T' stopped, ...
  // When it started, in clock ticks after boot (/proc/PID/stat's starttime): with the pid, it
  // names one process for good, since a recycled pid comes with a later start time.
  uint64_t start_time = 0;
};

// The process's state, as /proc/PID/stat gives it ('R', 'S', 'D', 'T', 't', 'Z', ...); nullopt
// when it cannot be read (the process is gone).
std::optional<char> ProcessState(pid_t pid);

// The process's line of the process table (/proc/PID/stat); nullopt when it cannot be read.
std::optional<ProcessEntry> ReadProcessEntry(pid_t pid);

// "stopped" for 'T' and 't', "disk sleep" for 'D', "running" for 'R', "sleeping" for 'S' and 'I',
// "zombie" for 'Z', otherwise the letter.
std::string ProcessStateName(char state);

// Every live (non-zombie) process whose chain of parents reaches `root` in `table`, excluding
// `root` itself, in breadth-first order (parents before their children). Pure; linear in the
// table's size.
std::vector<pid_t> DescendantsOf(pid_t root, const std::vector<ProcessEntry>& table);

// Reads the process table from /proc (processes that exit while it is read are skipped).
// Fails (kInternal) only if /proc cannot be listed.
Result<std::vector<ProcessEntry>> ReadProcessTable();

// Makes the calling process a child subreaper: orphaned descendants are re-parented to it.
Status BecomeChildSubreaper();

// Sends `signal` to every live descendant of the calling process whose process group is not in
// `except_groups` (groups the caller signals as a whole). Returns how many were signalled. A
// process that exits in between is not an error.
Result<size_t> SignalDescendants(int signal, const std::vector<pid_t>& except_groups = {});

// How long KillAllDescendants keeps sweeping: each round signals and reaps what it finds, and a
// process that forks between rounds is caught by the next; a tree that is still growing after
// this long is reported rather than waited for forever.
inline constexpr std::chrono::milliseconds kDescendantSweepTimeout{2000};

// SIGKILLs every descendant of the calling process and reaps those that are (or become) its
// children, until none is left alive or `timeout` has passed. Returns how many were killed in
// total. Fails (kDeadlineExceeded, naming the survivors) when live descendants remain at the
// deadline. Only for a process whose children are all part of the job (the agent at its end,
// the launcher after its agents): it reaps any child, so call it after the caller's own waits.
Result<size_t> KillAllDescendants(std::chrono::milliseconds timeout = kDescendantSweepTimeout);

}  // namespace dslaunch
