// The workers' progress files on a node (docs/elastic.md, "Hang detection and progress reports"):
// their names, their creation, and polling them for writes. The I/O half of hang detection; what a
// report means and when a rank is stalled is ProgressWatchdog's (agent/progress/progress_watchdog.h).
//
// A write is detected by a change of the file's modification time (nanoseconds), size or inode
// (a file renamed over it) between two polls. Two rewrites of the same size within one tick of
// the kernel's file clock, with a poll between them, are seen as one: a missed report is at worst
// one poll interval of silence too many, and the next report is seen. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <ctime>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/workers/log_files.h"
#include "agent/progress/progress_watchdog.h"
#include "common/status.h"

namespace dslaunch::agent {

// The name of a rank's progress file in the job's directory: "rank<N>.progress" in generation 0,
// "rank<N>.gen<G>.progress" later (WorkerFileName, agent/workers/log_files.h). Every use of the name goes
// through here.
std::string ProgressFileName(int rank, int generation = 0);

// Creates the rank's progress file, empty, in `dir` (mode 0600, refused if it exists, as every
// file of the job directory: JobLogDir::CreateFile). Returns its absolute path, which the worker
// gets as DSLAUNCH_PROGRESS_FILE.
Result<std::string> CreateProgressFile(const JobLogDir& dir, int rank, int generation = 0);

// A change seen in a rank's progress file: a write (a report), or its removal.
struct ProgressFileEvent {
  int rank = 0;
  // What the write said: an empty report when it could not be read or parsed (the write still
  // counts as progress); absent when the file was removed (no report, only the warning).
  std::optional<ProgressReport> report;
  // Set the first time a rank's file could not be read or parsed, or was removed (one warning per
  // rank, so a worker writing the wrong thing cannot flood the agent's stderr); a line without
  // the agent's prefix, e.g. "rank 3: progress file '/x/rank3.progress': step '4x' is not ...".
  std::optional<std::string> warning;
};

class ProgressFiles {
 public:
  // Starts watching `path` for `rank`. Its state now is the baseline: only later writes count, so
  // call this before the worker starts. Watching a rank again replaces its file.
  void Watch(int rank, std::string path);

  // Every watched file written since the last poll (or since Watch), by rank, each read (at most
  // kMaxProgressReportBytes + 1 bytes) and parsed. A file that was removed is no report (only a
  // warning, the first time); a file created again under the path is a report.
  std::vector<ProgressFileEvent> Poll();

  // Polls the rank's file a last time and stops watching it: a report written just before the
  // worker exited still counts (for its last step). Nothing for a rank not watched or not written.
  std::optional<ProgressFileEvent> Finish(int rank);

 private:
  // What identifies one state of the file; a write changes it.
  struct Signature {
    bool exists = false;
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    timespec mtime{};
    bool operator==(const Signature& o) const;
  };
  struct File {
    std::string path;
    Signature last;
    bool warned = false;
  };

  static Signature Stat(const std::string& path);
  std::optional<ProgressFileEvent> PollOne(int rank, File& file);

  std::map<int, File> files_;
};

}  // namespace dslaunch::agent
