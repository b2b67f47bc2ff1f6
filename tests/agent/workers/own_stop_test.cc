// The grace period of the agent's own stops (agent/workers/own_stop.h; docs/elastic.md, "Fencing
// a lost node").
#include "agent/workers/own_stop.h"

#include <doctest/doctest.h>

namespace dslaunch::agent {
namespace {

TEST_CASE("OwnStopGrace: a lost launcher stops a restartable job's workers within the failure grace") {
  control::Assignment a;
  a.grace_period_ms = 30000;
  a.restartable = true;
  CHECK(OwnStopGrace(OwnStopCause::kLostLauncher, a) == kFailureStopGrace);
  CHECK(OwnStopGrace(OwnStopCause::kSignal, a) == std::chrono::milliseconds(30000));
  a.grace_period_ms = 400;  // never longer than the job's own grace period
  CHECK(OwnStopGrace(OwnStopCause::kLostLauncher, a) == std::chrono::milliseconds(400));
  a.grace_period_ms = 30000;
  a.restartable = false;  // no later generation can meet these workers: the whole grace period
  CHECK(OwnStopGrace(OwnStopCause::kLostLauncher, a) == std::chrono::milliseconds(30000));
}

}  // namespace
}  // namespace dslaunch::agent
