// Resuming a run (docs/checkpoint.md, "Which checkpoint a run resumes"): the plan read from the
// checkpoint directories (runtime/checkpoint/resume_plan.h), then the collective that tries its
// candidates until one loads, skipping a damaged or corrupt one in favour of the next older one.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "common/status.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/resume_plan.h"
#include "runtime/comm/communicator.h"
#include "runtime/config/checkpoint_config.h"
#include "runtime/engine/engine.h"

namespace dslaunch::runtime {

// The global_step directory `path` names: `path` itself when it holds meta.json, else the one the
// `latest` file in it names (the rule of checkpoint.load with a path, and of export). kNotFound
// when `path` does not exist or holds neither meta.json nor `latest`; kDataLoss when `latest`
// names nothing or a directory without meta.json.
Result<std::string> ResolveCheckpointPath(const std::string& path);

// Reads checkpoint.dir and what `load` names, and plans (PlanResume). Local: every rank plans on
// its own; ResumeFromPlan checks that they agree.
Result<ResumePlan> PlanCheckpointResume(const CheckpointConfig& config);

struct ResumeOutcome {
  std::optional<LoadResult> loaded;  // nullopt: a fresh start at step 0
  std::string path;                  // the checkpoint resumed; empty when from memory
  bool from_memory = false;          // restored from in-memory snapshots (memory_restore.h)
};

// Called on every rank for each candidate skipped: its path and why (the same text on every rank).
using SkippedCheckpoint = std::function<void(const std::string& path, const std::string& why)>;

// Collective: the ranks check that they made the same plan, then try its candidates in order.
// Each is checked (CheckStepDirectory, the shards shared out among the ranks) and loaded
// (LoadCheckpoint, which verifies the CRC-32C of every shard a rank reads); the ranks agree on
// the outcome. kFresh: nothing is loaded. kNewest: a candidate that is unfinished, damaged or
// corrupt (kNotFound, kDataLoss) is reported to `skipped` and the next one is tried, the engine
// restored again from scratch; when none loads the error (kFailedPrecondition) names the newest
// and why, and says what to do: a run never starts at step 0 over checkpoints. kExplicit: its
// failure is returned, with what to do. Any other error (the checkpoint does not fit the run, a
// failed collective) is returned at once.
Result<ResumeOutcome> ResumeFromPlan(const ResumePlan& plan, Engine& engine, Communicator& comm,
                                     const CheckpointRun& run, const SkippedCheckpoint& skipped);

}  // namespace dslaunch::runtime
