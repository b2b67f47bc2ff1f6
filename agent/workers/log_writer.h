// LogWriter: one of a rank's log files as the agent appends its output to it (docs/launcher.md,
// "Log files"). A write that fails (a full disk, a file over the size limit, an I/O error) must not
// stop the job, and must not go unnoticed either: the writer counts every byte and line that did
// not reach the file and hands the first failure back once, for the agent to report (OUTPUT_LOST).
// Later blocks are still tried, so a disk that gets space back takes the rest (the file then has a
// gap, which the report names). Not thread-safe; used on the agent's event loop.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/unique_fd.h"

namespace dslaunch::agent {

class LogWriter {
 public:
  LogWriter() = default;
  // `fd` is open for appending; `path` names the file in reports.
  LogWriter(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}

  // Appends `block` (whole lines, each ended by '\n'). Returns the first failed write's error,
  // once, naming the file ("cannot write log file 'P': No space left on device"); nullopt when the
  // block was written or an earlier failure was already returned. A block written in part counts
  // its unwritten bytes as lost, and every line not written whole.
  std::optional<Status> Append(std::string_view block);

  const std::string& path() const { return path_; }
  bool lost() const { return lost_bytes_ > 0; }
  uint64_t lost_bytes() const { return lost_bytes_; }
  uint64_t lost_lines() const { return lost_lines_; }
  // The errno text of the first failed write ("No space left on device"); empty if none failed.
  const std::string& first_error() const { return first_error_; }

 private:
  UniqueFd fd_;
  std::string path_;
  uint64_t lost_bytes_ = 0;
  uint64_t lost_lines_ = 0;
  std::string first_error_;
};

}  // namespace dslaunch::agent
