// The node-local record of an agent's workers, which lets the next agent of the same node fence
// them (docs/elastic.md, "Fencing a lost node"): its format, and the judgement of what the
// process table says about each recorded process. Pure: no files, no /proc, no signals
// (agent/node/node_fence.h does the I/O).
//
// The record is the file kFenceRecordFile in the agent's private directory
// (agent/node/secret_dir.h), rewritten whole (write to a temporary file, then rename) each time the
// agent starts a worker. One line per process, fields separated by one space:
//
//   agent PID START_TIME
//   worker GENERATION RANK PGID START_TIME
//
// START_TIME is /proc/PID/stat's starttime (clock ticks after boot): a pid and its start time
// name one process for good, so a recycled pid is never taken for the recorded process. A worker
// leads its own process group (PGID = its pid), and what it starts stays in that group unless it
// leaves it (those die with the worker's agent, which is a child subreaper, when it is killed).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dslaunch::agent {

// The record's name in the agent's private directory.
inline constexpr char kFenceRecordFile[] = "workers";

struct RecordedProcess {
  pid_t pid = 0;
  uint64_t start_time = 0;
};

struct RecordedWorker {
  int generation = 0;
  int rank = 0;
  RecordedProcess leader;  // leader.pid is the worker's process group id
};

struct FenceRecord {
  RecordedProcess agent;
  std::vector<RecordedWorker> workers;
};

// The record's text (ends with a newline).
std::string FormatFenceRecord(const FenceRecord& record);

// Parses FormatFenceRecord's text. An unknown line kind, a missing or extra field, a number that
// does not parse, a pid <= 0 or a missing or second `agent` line is kInvalidArgument naming
// `where` and the line: "WHERE:3: worker line has 4 fields, expected 5".
Result<FenceRecord> ParseFenceRecord(std::string_view text, std::string_view where);

// What the process table shows at a recorded pid: nothing (nullopt), or a process with its start
// time and whether it is a zombie.
struct Sighting {
  uint64_t start_time = 0;
  bool zombie = false;
};

enum class Fate {
  kGone,   // nothing of it runs: the pid is free, a zombie, or (a group) no member is alive
  kAlive,  // it (or, for a group, a member of it) still runs and must be killed
};

// A recorded process: alive only while a non-zombie process with its pid and start time runs.
// A pid that now belongs to a process with another start time was recycled: the recorded one is
// gone, and the new one must never be signalled.
Fate JudgeProcess(const RecordedProcess& recorded, const std::optional<Sighting>& at_pid);

// A recorded worker's process group. `leader` is what runs at the group id's pid;
// `other_members` how many live processes other than the leader have that group id.
// Linux never gives out a pid while a process group of that id has a member, so a leader pid
// that now runs a process with another start time means the recorded group is empty (and the
// members counted belong to the new process's group: not ours).
Fate JudgeGroup(const RecordedProcess& leader_record, const std::optional<Sighting>& leader, int other_members);

}  // namespace dslaunch::agent
