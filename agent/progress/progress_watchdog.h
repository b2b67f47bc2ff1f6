// Hang detection, the pure half (docs/elastic.md, "Hang detection and progress reports"): the
// grammar of a progress report, and the per-rank bookkeeping that decides when a rank has been
// silent for longer than its watchdog timeout. No files, no clocks, no signals: the agent's poll
// of the progress files (agent/progress/progress_files.h) feeds it, with the time as an input.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/progress_figures.h"
#include "common/status.h"

namespace dslaunch::agent {

// The longest report read from a progress file: a step, a timeout and every figure, each at its
// longest, fit in 256 bytes; the agent, which polls every rank's file several times a second,
// reads no more than this.
inline constexpr size_t kMaxProgressReportBytes = 512;

// The largest timeout= a rank may give: longer than any step or checkpoint phase, and far from
// overflowing the milliseconds it is kept in. timeout=0 is how to turn the watchdog off.
inline constexpr std::chrono::seconds kMaxProgressTimeout{30 * 24 * 3600};

// One write to a rank's progress file: "STEP [timeout=SECONDS] [NAME=NUMBER ...]", one line,
// trailing newline optional. Every write is a report, whatever it holds.
struct ProgressReport {
  std::optional<int64_t> step;                       // absent: a report without a step
  std::optional<std::chrono::milliseconds> timeout;  // the rank's timeout from now on; 0 = off
  ProgressFigures figures;                           // docs/observability.md, "Progress reports"

  bool operator==(const ProgressReport&) const = default;
};

// Parses the text of a progress file. Grammar: optional spaces and tabs around and between the
// parts, then an optional STEP (a non-negative decimal integer that fits in 63 bits), then, in
// any order, each at most once, an optional "timeout=SECONDS" (a decimal number >= 0 such as 90
// or 1.5, at most kMaxProgressTimeout; rounded up to whole milliseconds, so a positive timeout
// never turns the watchdog off) and optional figures "NAME=NUMBER" (common/progress_figures.h:
// step_ms=, loss=, tokens_per_s=, val_loss=, val_step=, ckpt_s=, ckpt_bytes=, ckpt_step=), then an
// optional "\n" or "\r\n". Empty text is a report without a step. A report of the old grammar
// ("STEP timeout=SECONDS") is a report without figures.
// Errors (kInvalidArgument) say what is wrong and show the offending part, e.g.
// "step '4x' is not a non-negative integer (expected 'STEP [timeout=SECONDS] [NAME=NUMBER ...]')":
// text longer than kMaxProgressReportBytes, more than one line, an unknown part or figure, a part
// out of range, not finite or given twice.
Result<ProgressReport> ParseProgressReport(std::string_view text);

// A rank found silent for longer than its watchdog timeout.
struct Stall {
  int rank = 0;
  int64_t last_step = -1;             // the last step it reported, -1 if none
  std::chrono::milliseconds silence;  // since its last report (or its start), rounded up: > timeout
  std::chrono::milliseconds timeout;  // the timeout in effect

  bool operator==(const Stall&) const = default;
};

// "rank 3 reported no progress for 3.1 s (last step 41, watchdog timeout 3.0 s)", or with
// "no step reported" for a rank that reported none.
std::string DescribeStall(const Stall& stall);

// Per-rank watchdog bookkeeping. The timeout in effect for a rank is the last timeout= it
// reported, else the default given at Start (the launcher's --watchdog_timeout); zero means no
// watchdog. Silence is counted from the rank's last report, or from its start. Pure; not
// thread-safe; time is an input (steady clock).
class ProgressWatchdog {
 public:
  using Clock = std::chrono::steady_clock;

  // `check_interval`: how often the caller promises to call Check (> 0).
  explicit ProgressWatchdog(std::chrono::milliseconds check_interval);

  // Starts watching `rank`, afresh if it was watched before (no step, no timeout of its own).
  // `default_timeout` zero: no watchdog until the rank asks for one.
  void Start(int rank, Clock::time_point now, std::chrono::milliseconds default_timeout);

  // A write to the rank's progress file, seen at `now`: its silence starts again; a step and a
  // timeout in the report replace the rank's. Ignored for a rank not running (never started,
  // exited, or already returned as stalled).
  void OnReport(int rank, Clock::time_point now, const ProgressReport& report);

  // The rank's worker has exited: it is no longer watched. Its last step stays readable.
  void OnExited(int rank);

  // The running ranks whose silence at `now` is longer than their (non-zero) timeout, by rank;
  // each is returned once and then no longer watched (the caller kills it).
  // A call more than one check interval later than promised means the checker itself was not
  // running (the agent stopped, the node frozen): the time beyond the interval is not counted as
  // any rank's silence, which is no evidence against the rank (as with common/heartbeat.h's
  // CheckerWasSuspended).
  std::vector<Stall> Check(Clock::time_point now);

  // The last step the rank reported, -1 if none (or the rank is unknown).
  int64_t last_step(int rank) const;

  // The rank as a Stall would describe it at `now` (its silence so far, its last step, its timeout),
  // whether or not it is past its timeout: for a rank found stopped. A rank not watched: all zero,
  // last step -1.
  Stall Describe(int rank, Clock::time_point now) const;

 private:
  struct Rank {
    bool running = false;
    Clock::time_point last_report;  // or the start; moved forward over the checker's suspensions
    int64_t last_step = -1;
    std::chrono::milliseconds default_timeout{0};
    std::optional<std::chrono::milliseconds> own_timeout;  // the rank's timeout=, once given
  };
  static std::chrono::milliseconds TimeoutOf(const Rank& r) {
    return r.own_timeout ? *r.own_timeout : r.default_timeout;
  }

  std::chrono::milliseconds check_interval_;
  std::optional<Clock::time_point> last_check_;
  std::map<int, Rank> ranks_;
};

}  // namespace dslaunch::agent
