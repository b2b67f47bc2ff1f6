// StatusFeed: the launcher's view of a running job (launcher/status/job_status.h) kept from the
// events the runner handles, and published to the status board (options' JobBoard) for the status
// server (docs/observability.md): every output line of a rank goes to the board's log tail, agent
// messages to the view, and the view goes out at most every kBoardPublishInterval, at once when
// the job's state, generation or end changed. The view is kept without a board too when the
// straggler rule is on (it runs on the view); a straggler is printed and recorded in the events
// file. What the feed reads of the job (its tracker, generation, end, the endpoint's bytes) it
// asks the lifecycle through StatusSource when a view goes out.
//
// Threading: the loop's thread (JobLoop). The board is the only thing shared with another thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/control_messages.h"
#include "launcher/elastic/job_tracker.h"
#include "launcher/job/console.h"
#include "launcher/job/event_log.h"
#include "launcher/job/job_loop.h"
#include "launcher/plan/launch_plan.h"
#include "launcher/status/job_board.h"
#include "launcher/status/job_status.h"
#include "launcher/status/straggler_detector.h"

namespace dslaunch::launcher {

// The board gets a new view at most this often while progress reports stream in (a page polls
// about once a second; a view of 1000 ranks is ~200 KB to copy), and at once on a change of the
// job's state, generation or end; the last change is always published within this time.
inline constexpr std::chrono::milliseconds kBoardPublishInterval{200};

// What the feed reads of the job when a view goes out (JobRunner::Impl).
class StatusSource {
 public:
  virtual ~StatusSource() = default;
  // The current generation's tracker; null before the first generation (node mode, joining).
  virtual const JobTracker* tracker() const = 0;
  // The current generation's number (0 before the first).
  virtual int generation() const = 0;
  // The job is over.
  virtual bool finished() const = 0;
  // Bytes the endpoint has sent so far.
  virtual uint64_t store_bytes_sent() const = 0;
};

class StatusFeed {
 public:
  // `board`: null publishes nothing (and keeps no output line); `events` and `console` get the
  // straggler lines.
  StatusFeed(std::shared_ptr<JobBoard> board, StragglerOptions stragglers, JobLoop& loop, Console& console,
             EventLog& events, StatusSource& source);

  // Starts the view of job `job_id` running `program`, when there is a board or the straggler
  // rule is on; otherwise every call below does nothing.
  void Open(const std::string& job_id, const ProgramSpec& program);
  // A generation starts with `plan`: the view follows, and goes out.
  void OnGeneration(const LaunchPlan& plan);
  // A message from the agent of member `node_rank`: output lines of the current generation go to
  // the board's log tail; anything else to the view (a straggler is told), then Publish().
  void OnAgentMessage(int node_rank, const control::Message& msg);
  void OnAgentLost(int node_rank);
  // The job ended with `exit_code`: the last view goes out, with the outcome (succeeded, failed,
  // stopped: from the tracker's root cause) and the time it ended; no later one is scheduled.
  void OnFinished(int exit_code);
  // Publishes the view now when the job's state, generation or end changed, or the last publish
  // is kBoardPublishInterval old; otherwise once that time is up.
  void Publish();

 private:
  // -- Wiring --
  const std::shared_ptr<JobBoard> board_;
  const StragglerOptions stragglers_;
  JobLoop& loop_;
  Console& console_;
  EventLog& events_;
  StatusSource& source_;
  // -- The view, and what was published last --
  std::optional<JobStatus> status_;
  std::string published_state_;
  int published_generation_ = -1;
  SteadyClock::time_point last_publish_{};
  bool publish_pending_ = false;
  std::unique_ptr<JobTimer> publish_timer_;
};

}  // namespace dslaunch::launcher
