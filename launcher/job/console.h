// The launcher's console: workers' output lines and the end-of-job summary.
//
// Formatting is pure (FormatOutputLines, FormatSummary); Console writes each formatted block with
// a single write(2) so lines from different ranks never interleave.
#pragma once

#include <string>
#include <vector>

#include "common/control_messages.h"
#include "launcher/elastic/job_tracker.h"

namespace dslaunch::launcher {

// "[rank 3] line\n" for each line; with `host` non-empty (multi-node jobs) "[rank 3 node2] line".
std::string FormatOutputLines(int rank, const std::string& host, const std::vector<std::string>& lines);

// The root-cause summary printed when a job fails: what failed (rank, host, pid, exit code or
// signal name), the last lines of its stderr, and where its full log is. Empty for success.
std::string FormatSummary(const std::string& job_id, const JobTracker& tracker);

// Transient lines (a worker's progress bar: text ended by '\r', agent/workers/line_splitter.h) are drawn
// as one status line under the output when the console is interactive (stdout and stderr are a
// terminal): each new one replaces it, ordinary lines are printed above it, and it is cleared at
// the end. A non-interactive console drops them; ordinary lines are never affected.
class Console {
 public:
  Console(int stdout_fd, int stderr_fd, bool interactive = false, int width = 80)
      : out_fd_(stdout_fd), err_fd_(stderr_fd), interactive_(interactive), width_(width) {}
  ~Console() { ClearStatus(); }
  void PrintOutput(const control::Output& output, const std::string& host);
  void PrintError(const std::string& text);

 private:
  static void WriteAll(int fd, const std::string& text);
  void ClearStatus();
  int out_fd_;
  int err_fd_;
  bool interactive_;
  int width_;           // terminal columns: a longer status line is cut, or it would wrap
  std::string status_;  // the status line on screen, empty when none
};

}  // namespace dslaunch::launcher
