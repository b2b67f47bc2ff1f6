// JobBoard: where the launcher's thread posts what it knows about the job and the status
// server's thread reads it (docs/observability.md). The launcher publishes a whole JobView after
// each change it cares to show (launcher/status/job_status.h makes them) and appends every output
// line a rank prints; readers get copies. Thread-safe: one mutex, held only to copy.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "launcher/status/job_view.h"

namespace dslaunch::launcher {

// Lines of each rank's output the board keeps for the page and `dslaunch logs` of a running job:
// a screenful of context around a failure, at most ~100 KB per rank for lines of 100 bytes.
inline constexpr size_t kLogTailLines = 1000;

class JobBoard {
 public:
  explicit JobBoard(size_t log_lines_per_rank = kLogTailLines) : log_lines_per_rank_(log_lines_per_rank) {}

  void Publish(JobView view);
  JobView View() const;

  // A line `rank` printed (stdout or stderr, without its newline); the oldest goes past the limit.
  void AppendLog(int rank, std::string line);
  // The last `max_lines` lines of `rank` (fewer if it printed fewer), oldest first.
  std::vector<std::string> LogTail(int rank, size_t max_lines) const;

 private:
  const size_t log_lines_per_rank_;
  mutable std::mutex mu_;
  JobView view_;
  std::map<int, std::deque<std::string>> logs_;
};

}  // namespace dslaunch::launcher
