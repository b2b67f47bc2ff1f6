// Fencing a lost node before it takes part again (docs/elastic.md, "Fencing a lost node"): the
// I/O around agent/node/fence_record.h. An agent writes the record of the workers it starts into its
// private directory (WriteFenceRecord); a later agent of the same node, told by the launcher which
// agent held the node's place before (ASSIGNMENT's fence_agent_pid), kills that agent and the
// worker groups it recorded and waits until they are gone (FenceEarlierAgent), before it starts
// any worker of its own. Only processes of the calling user that the record names, with the
// recorded start time, are ever signalled.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "agent/node/fence_record.h"
#include "common/status.h"

namespace dslaunch::agent {

// How long the fence waits for what it killed to be gone: SIGKILL ends a process within
// milliseconds unless it sleeps uninterruptibly (a network file system, a GPU driver call that
// is releasing a device), which can take seconds; past this the node is not fit to take part.
inline constexpr std::chrono::milliseconds kFenceTimeout{10000};
// How often the fence looks at the process table while it waits.
inline constexpr std::chrono::milliseconds kFencePollInterval{20};

// Writes `record` to DIR/kFenceRecordFile through a temporary file and a rename, so that a
// reader sees the old record or the new one, never a part. Errors name the file.
Status WriteFenceRecord(const std::string& dir, const FenceRecord& record);

struct FenceReport {
  bool found_record = false;     // the earlier agent's directory and record were there
  bool agent_killed = false;     // the earlier agent still ran and was killed
  std::vector<RecordedWorker> killed;  // its worker groups that still had live members, killed
};

// Finds the private directory of agent `agent_pid` of job `job_id` in `runtime_dir` (named by
// SecretDirName, owned by the calling user, made in `own_pid_namespace`), SIGKILLs that agent and
// every recorded worker group that still has a live member, and waits until none is alive.
// No directory or no record: nothing ran there that could be fenced (an agent removes its
// directory when it exits, after its final sweep), an empty report. Fails with kUnavailable
// naming the survivors when something is still alive `timeout` after the SIGKILL, and with
// kInvalidArgument when the record does not parse.
Result<FenceReport> FenceEarlierAgent(const std::string& runtime_dir, std::string_view job_id, pid_t agent_pid,
                                      const std::string& own_pid_namespace,
                                      std::chrono::milliseconds timeout = kFenceTimeout);

// One line for the agent's log: "killed the agent (pid 123) and 1 worker (rank 1 of generation 0,
// process group 130) of the agent that held this node's place before; they are gone".
std::string DescribeFence(const FenceReport& report, pid_t agent_pid);

}  // namespace dslaunch::agent
