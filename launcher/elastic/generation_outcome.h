// How a generation ended, in the policy's terms, and the job's history for the final summary.
// Pure: reads a finished JobTracker and the policy's records (docs/elastic.md).
#pragma once

#include <string>
#include <vector>

#include "launcher/elastic/elastic_policy.h"
#include "launcher/elastic/job_tracker.h"

namespace dslaunch::launcher {

// The outcome of the generation `tracker` followed. `members`: candidate index by node rank;
// `gone`: candidates whose agent cannot take part in another generation (lost, failed, past the
// stop deadline, or leaving on its own), sorted. A generation that lost nodes is kNodesLost
// whatever its root cause (membership must change), except a start-up failure (kStartupFailed
// with the nodes that never registered), an interrupted job (kInterrupted) and a scale-up stop.
GenerationOutcome OutcomeOf(const JobTracker& tracker, const std::vector<int>& members,
                            const std::vector<int>& gone);

// The root cause in one phrase: "rank 3 on host a exited with code 1", "node b lost (no
// heartbeat for 3.0 s)", "rank 2 on host a reported no progress for 3.1 s".
std::string DescribeRootCause(const RootCause& cause);

// One line per generation of the job, oldest first: its nodes, how it ended and what followed.
// "dslaunch: generation 0 on a, b (4 ranks): rank 3 on host a exited with code 1 -> restart".
std::string FormatGenerationHistory(const ElasticPolicy& policy);

}  // namespace dslaunch::launcher
