// The log files `dslaunch logs` reads of a job that is not running (docs/observability.md,
// "dslaunch status and logs"): which files are a rank's, and reading one without being tricked.
// The job directory may be shared (`--log_dir` on a group's file system), so a file there may be
// anything: ReadLogTail opens only a regular file, never through a symbolic link, never blocking
// (a FIFO), and reads a bounded part of it (a link to /dev/zero, a huge file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace dslaunch::launcher {

// The most of one log file `dslaunch logs` reads, from its end: a screenful of lines is a few
// KiB, a whole log of a long run can be gigabytes; 64 MiB is more than a terminal or a pager
// wants, and bounded memory whatever the file is.
inline constexpr uint64_t kMaxLogReadBytes = 64ull << 20;

// The newest generation's log files of `rank` in `dir` (rankN.stdout.log and rankN.stderr.log,
// or rankN.genG.*), stdout first; empty when `dir` has none of the rank's.
std::vector<std::string> RankLogFiles(const std::string& dir, int rank);

struct LogTail {
  std::string text;         // the lines, each ending in '\n'
  uint64_t file_bytes = 0;  // the file's size when it was opened
  bool cut = false;         // the file is larger than kMaxLogReadBytes: `text` is from its last part only
};

// The last `lines` lines (0: all) of the file at `path`, from at most its last
// `max_bytes` (cut there at a line's start). The file is opened with O_NOFOLLOW and O_NONBLOCK
// and must then be a regular file (fstat); it is read up to the size it had then.
// Errors, each naming the file: kNotFound when it does not exist; kFailedPrecondition when it is
// a symbolic link or not a regular file (saying what it is, and what to do); kInternal for
// another open or read error.
Result<LogTail> ReadLogTail(const std::string& path, size_t lines, uint64_t max_bytes = kMaxLogReadBytes);

}  // namespace dslaunch::launcher
