// The job's log directory on a node and the per-rank log files in it (docs/launcher.md, "Log
// files"). The agent opens every log file here, before it starts any worker.
//
// The directory is the launcher's --log_dir/JOB_ID, or by default RUNTIME_DIR/dslaunch-UID/JOB_ID
// on each node (RUNTIME_DIR is the agent's $TMPDIR or /tmp), where dslaunch-UID is private to the
// user: created 0700 and refused when another user owns it or others may write to it. The job's
// directory is created 0700 and must belong to the user; log files are created 0600 with
// O_CREAT | O_EXCL | O_NOFOLLOW relative to the opened directory, so an existing file or a planted
// symbolic link is never written through, and a job id used before on this node is refused.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "common/status.h"
#include "common/unique_fd.h"

namespace dslaunch::agent {

// The name of a rank's file in the job's directory: "rank3.stdout.log" in generation 0,
// "rank3.gen2.stdout.log" in generation 2 (a later generation never reuses a file, and ranks are
// renumbered between generations). `suffix`: "stdout.log", "stderr.log", "error.json", ...
std::string WorkerFileName(int rank, int generation, std::string_view suffix);

// The first kMaxErrorRecordBytes (common/error_record.h) of a worker's error record at `path`
// (its TORCHELASTIC_ERROR_FILE, not followed if it is a symbolic link); empty if it wrote none or
// the file cannot be read.
std::string ReadErrorRecord(const std::string& path);

// The per-user base of the default log directories: RUNTIME_DIR/dslaunch-UID.
std::string DefaultLogBase(const std::string& runtime_dir, uid_t uid);

struct LogDirRequest {
  std::string log_dir;      // the assignment's log_dir (--log_dir/JOB_ID); empty: the default
  std::string runtime_dir;  // where the default base goes ($TMPDIR or /tmp of the agent)
  std::string job_id;       // the last component of the default; must pass ValidateJobId
  uid_t uid = 0;            // the agent's user
};

// An open job log directory. Move-only.
class JobLogDir {
 public:
  // Creates (when missing) and opens the job's log directory. Errors, all saying which directory
  // and what to do: kInvalidArgument for an invalid job id; kFailedPrecondition for a default base
  // owned by another user or writable by group or others, a job directory owned by another user,
  // or a path that is not a directory (a symbolic link included); otherwise the errno of the
  // failing call, as "cannot create log directory 'PATH': Permission denied".
  static Result<JobLogDir> Open(const LogDirRequest& request);

  // The directory's path as used for opening it (absolute when the request's paths are).
  const std::string& path() const { return path_; }

  // Creates `name` (a file name, no '/') in the directory for appending, mode 0600, close-on-exec.
  // An existing file, a symbolic link included, is kFailedPrecondition: "log file 'P' already
  // exists: job id 'J' was used before on this node ...".
  Result<UniqueFd> CreateFile(const std::string& name) const;

  // A rank's files of one generation (WorkerFileName): its stdout and stderr logs, created as by
  // CreateFile, and the absolute path of its error record (TORCHELASTIC_ERROR_FILE), where any
  // file left under that name is removed first so that it is never taken for this worker's.
  struct WorkerLogs {
    UniqueFd out, err;
    std::string out_path;    // the stdout log, as the directory's path names it
    std::string err_path;    // the stderr log, likewise
    std::string error_file;  // absolute
  };
  Result<WorkerLogs> CreateWorkerLogs(int rank, int generation) const;

 private:
  JobLogDir(std::string path, std::string job_id, UniqueFd fd)
      : path_(std::move(path)), job_id_(std::move(job_id)), fd_(std::move(fd)) {}

  std::string path_;
  std::string job_id_;
  UniqueFd fd_;
};

}  // namespace dslaunch::agent
