// The grace period of a stop the agent decides on its own (docs/protocol.md, "Agent control
// messages"; docs/elastic.md, "Fencing a lost node"). Pure.
#pragma once

#include <chrono>

#include "common/control_messages.h"
#include "common/stop_grace.h"

namespace dslaunch::agent {

enum class OwnStopCause {
  kSignal,        // the agent got SIGTERM, SIGINT or SIGHUP (a scheduler's preemption, Ctrl-C)
  kLostLauncher,  // the control connection closed, the launcher's heartbeats stopped, or its stream broke
};

// A signal keeps the assignment's whole grace period: the workers are healthy and may save. A lost
// launcher is a failure, stopped as the launcher stops one (launcher/job/job_runner.cc, StopGrace):
// at most kFailureStopGrace when the job may restart, since the launcher may then re-admit this
// node, or give its place to another, and the stale workers must be gone before; the whole grace
// period otherwise (no later generation can meet them).
inline std::chrono::milliseconds OwnStopGrace(OwnStopCause cause, const control::Assignment& assignment) {
  const std::chrono::milliseconds grace(assignment.grace_period_ms);
  if (cause == OwnStopCause::kLostLauncher && assignment.restartable) return FailureStopGrace(grace);
  return grace;
}

}  // namespace dslaunch::agent
