// The per-user record of a running launcher with a status page, which `dslaunch status` and
// `dslaunch logs` read to find it (docs/observability.md, "dslaunch status and logs").
//
// One file per job, TEMP/dslaunch-UID/running/JOB_ID.json (TEMP: $TMPDIR, else /tmp), next to the
// default log directories and under the same rule: dslaunch-UID is the user's own (mode 0700, not
// writable by others), files are 0600. The launcher writes it once its status server listens and
// removes it at exit; a launcher killed with SIGKILL leaves it behind, which readers recognise by
// its pid and skip.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace dslaunch::launcher {

struct JobStateRecord {
  std::string job_id;
  std::string url;      // the status page, "http://127.0.0.1:PORT/", without the token
  int64_t pid = 0;      // the launcher's
  std::string log_dir;  // the job's log directory on every node (LOG_DIR/JOB_ID)
  int64_t started_ms = 0;
  // The page's token (status_access.h): the record is the place `dslaunch status` and the job's
  // user read it from. Empty in a record written by a launcher from before the token.
  std::string token;
};

// TEMP/dslaunch-UID: the user's base of default log directories (agent/workers/log_files.h's
// DefaultLogBase, written here again: the launcher does not include the agent's code).
std::string UserRuntimeBase(const std::string& temp_dir, uid_t uid);
// UserRuntimeBase(...)/running: where the records are.
std::string JobStateDir(const std::string& temp_dir, uid_t uid);

std::string JobStateJson(const JobStateRecord& record);
// kInvalidArgument naming `where` (the file) and the field that is missing or wrong.
Result<JobStateRecord> ParseJobStateJson(const std::string& text, const std::string& where);

// Writes `dir`/JOB_ID.json (mode 0600, through a temporary file and a rename), creating `dir`
// and its parent with mode 0700. kFailedPrecondition when the parent belongs to another user or
// others may write to it, saying what to do.
Status WriteJobState(const std::string& dir, const JobStateRecord& record);

// Every record in `dir` (none when it does not exist), sorted by job id. A file that does not
// parse is an error naming it.
Result<std::vector<JobStateRecord>> ReadJobStates(const std::string& dir);

// Removes `dir`/JOB_ID.json; a missing file is fine.
void RemoveJobState(const std::string& dir, const std::string& job_id);

}  // namespace dslaunch::launcher
