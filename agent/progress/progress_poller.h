// ProgressPoller: the agent's side of hang detection and progress reports (docs/elastic.md, "Hang
// detection and progress reports"): it polls the workers' progress files (ProgressFiles) and feeds
// what they say to the watchdog (ProgressWatchdog), and says what the launcher must hear
// (WORKER_PROGRESS, for a report with a step or a figure: at most one per rank per poll, since a
// poll sees a file's last state) and which ranks are stalled. Acting on a stall (WORKER_STALLED,
// SIGKILL to the rank's process group) is the session's, which owns the processes; so is the
// timer that calls Poll every interval. Reads the files; no clock (time is an input), no
// signals; not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/progress/progress_files.h"
#include "agent/progress/progress_watchdog.h"
#include "common/control_messages.h"

namespace dslaunch::agent {

// How often the workers' progress files are polled: a stall is seen at most this long after the
// timeout, little next to the shortest sensible timeout (a second); one lstat per rank five times
// a second costs next to nothing.
inline constexpr std::chrono::milliseconds kProgressPollInterval{200};

// What a poll found, each in the order found.
struct ProgressPoll {
  std::vector<std::string> warnings;              // lines without the agent's prefix
  std::vector<control::WorkerProgress> progress;  // WORKER_PROGRESS for the launcher
  std::vector<Stall> stalls;                      // ranks silent past their timeout, each once
};

class ProgressPoller {
 public:
  using Clock = std::chrono::steady_clock;

  // `interval`: how often the caller promises to call Poll.
  explicit ProgressPoller(std::chrono::milliseconds interval = kProgressPollInterval);

  // Watches `rank`'s progress file at `path` from `now` on, afresh, with the assignment's
  // watchdog timeout as its default (0: none). Call it before the worker starts: a report written
  // at once is not taken for the baseline.
  void Watch(int rank, std::string path, std::chrono::milliseconds default_timeout, Clock::time_point now);

  // Every watched file written since the last poll, and every rank silent past its timeout at
  // `now`; messages carry `generation`.
  ProgressPoll Poll(int generation, Clock::time_point now);

  // `rank`'s worker was reaped: its file is read a last time (a report written just before the
  // exit still gives its last step) and the rank is no longer watched. No stalls.
  ProgressPoll OnExited(int generation, int rank, Clock::time_point now);

  // The last step the rank reported, -1 if none.
  int64_t last_step(int rank) const { return watchdog_.last_step(rank); }
  // The rank as a stall would describe it at `now`, past its timeout or not (a rank found stopped).
  Stall Describe(int rank, Clock::time_point now) const { return watchdog_.Describe(rank, now); }

 private:
  void OnEvent(int generation, const ProgressFileEvent& e, Clock::time_point now, ProgressPoll& poll);

  ProgressFiles files_;
  ProgressWatchdog watchdog_;
};

}  // namespace dslaunch::agent
