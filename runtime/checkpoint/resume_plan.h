// Which checkpoints a run tries to resume from, in which order, and what it may do when none
// loads (docs/checkpoint.md, "Which checkpoint a run resumes"). Pure: decided from the train.json
// section and the listing of checkpoint.dir (runtime/checkpoint/checkpoint_directory.h); the
// collective that tries the candidates is runtime/checkpoint/resume.h.
//
//   kFresh     start at step 0: no `load` at generation 0 and nothing in dir that a step-0 run
//              would overwrite; or `load: auto` / a restart and dir holds no checkpoint yet
//   kExplicit  the one checkpoint `load: PATH` names; no other is tried if it cannot be loaded
//   kNewest    `load: auto`, or a restart (resume_newest), over a dir that holds checkpoints:
//              what `latest` names, then the older ones, newest first; without a usable
//              `latest`, every step directory with meta.json, newest first (found by scanning)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/checkpoint/checkpoint_directory.h"
#include "runtime/config/checkpoint_config.h"

namespace dslaunch::runtime {

enum class ResumeMode { kFresh, kExplicit, kNewest };

struct ResumeCandidate {
  std::string path;  // a global_step<N> directory
  int64_t step = 0;  // N; for kExplicit the step is not known from the name: -1
};

struct ResumePlan {
  ResumeMode mode = ResumeMode::kFresh;
  std::vector<ResumeCandidate> candidates;  // kExplicit: one; kNewest: in the order to try
  // kNewest: why `latest` was not followed ("/ckpt/latest is missing"); empty when it was.
  std::string scan_reason;
  bool restart = false;  // checkpoint.resume_newest: the run is a restart resuming on its own
};

// The plan for `config`. `dir` is the listing of config.checkpoint.dir (empty when it is unset);
// `explicit_path` the checkpoint `load: PATH` resolves to (ResolveCheckpointPath), read only when
// the plan needs it. Fails (kFailedPrecondition) for a run without `load` at generation 0 whose
// dir already holds checkpoints: starting at step 0 would overwrite them.
Result<ResumePlan> PlanResume(const CheckpointConfig& config, const CheckpointDirectoryListing& dir,
                              const Result<std::string>& explicit_path);

// A number that differs between two plans that try different candidates: the ranks compare it,
// so that ranks seeing different files (a checkpoint.dir that is not shared) fail together.
int64_t PlanFingerprint(const ResumePlan& plan);

}  // namespace dslaunch::runtime
