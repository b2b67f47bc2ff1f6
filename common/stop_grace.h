// How long a stop caused by a failure gives the workers between SIGTERM and SIGKILL. One fact for
// the launcher (a rank failed or hung, a node was lost) and the agent (it lost the launcher): see
// docs/elastic.md, "The stop". Pure.
#pragma once

#include <algorithm>
#include <chrono>

namespace dslaunch {

// A restartable job stopped by a failure gives its workers at most this long after SIGTERM: their
// peers are gone (or, for an agent that lost the launcher, the job goes on without this node), so
// their collectives and a save-on-stop (which needs them) cannot complete, and every second here
// is a second before the restart, or a second in which a cut-off node's stale workers still run
// beside their replacements. Stops where every rank is healthy (the launcher interrupted, a
// scale-up, the agent got SIGTERM) keep the whole grace period.
inline constexpr std::chrono::milliseconds kFailureStopGrace{1000};

// The grace period of a stop caused by a failure, for a job whose --grace_period is `grace_period`.
inline std::chrono::milliseconds FailureStopGrace(std::chrono::milliseconds grace_period) {
  return std::min(grace_period, kFailureStopGrace);
}

}  // namespace dslaunch
