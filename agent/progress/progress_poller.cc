#include "agent/progress/progress_poller.h"

#include <utility>

namespace dslaunch::agent {

ProgressPoller::ProgressPoller(std::chrono::milliseconds interval) : watchdog_(interval) {}

void ProgressPoller::Watch(int rank, std::string path, std::chrono::milliseconds default_timeout,
                           Clock::time_point now) {
  files_.Watch(rank, std::move(path));
  watchdog_.Start(rank, now, default_timeout);
}

ProgressPoll ProgressPoller::Poll(int generation, Clock::time_point now) {
  ProgressPoll poll;
  for (const ProgressFileEvent& e : files_.Poll()) OnEvent(generation, e, now, poll);
  poll.stalls = watchdog_.Check(now);
  return poll;
}

ProgressPoll ProgressPoller::OnExited(int generation, int rank, Clock::time_point now) {
  ProgressPoll poll;
  if (auto last = files_.Finish(rank)) OnEvent(generation, *last, now, poll);
  watchdog_.OnExited(rank);
  return poll;
}

// A write to a rank's progress file: the watchdog hears of it, and the launcher of what it said
// when it holds a step or a figure.
void ProgressPoller::OnEvent(int generation, const ProgressFileEvent& e, Clock::time_point now, ProgressPoll& poll) {
  if (e.warning) poll.warnings.push_back(*e.warning);
  if (!e.report) return;
  watchdog_.OnReport(e.rank, now, *e.report);
  if (e.report->step || !e.report->figures.empty()) {
    poll.progress.push_back(control::WorkerProgress{generation, e.rank, e.report->step.value_or(-1), e.report->figures});
  }
}

}  // namespace dslaunch::agent
