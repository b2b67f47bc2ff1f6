#include "runtime/checkpoint/resume.h"

#include <filesystem>
#include <span>
#include <vector>

#include "common/file_io.h"
#include "runtime/checkpoint/checkpoint_directory.h"
#include "runtime/checkpoint/names.h"
#include "runtime/comm/agreement.h"

namespace dslaunch::runtime {
namespace fs = std::filesystem;
namespace {

// A checkpoint that is not what it says (unfinished, damaged, corrupt): the next one may do.
bool IsDamage(const Status& status) {
  return status.code() == StatusCode::kDataLoss || status.code() == StatusCode::kNotFound;
}

// Collective: every rank's plan is rank 0's.
Status AgreeOnPlan(Communicator& comm, const ResumePlan& plan) {
  const size_t world = static_cast<size_t>(comm.world_size());
  const int64_t mine = PlanFingerprint(plan);
  std::vector<int64_t> all(world);
  DSLAUNCH_RETURN_IF_ERROR(comm.AllGather(std::span<const int64_t>(&mine, 1), std::span<int64_t>(all),
                                          std::vector<size_t>(world, 1))
                               .WithContext("checkpoint resume: comparing the ranks' plans"));
  for (size_t r = 1; r < world; ++r) {
    if (all[r] != all[0]) {
      return FailedPreconditionError("checkpoint resume: rank " + std::to_string(r) +
                                     " sees other checkpoints than rank 0 (this rank's first candidate: " +
                                     (plan.candidates.empty() ? std::string("none") : plan.candidates[0].path) +
                                     "): checkpoint.dir must be on a file system every rank shares");
    }
  }
  return Status::Ok();
}

// Collective: checks and loads one candidate; every rank returns the same outcome.
Result<LoadResult> TryCandidate(const ResumeCandidate& candidate, Engine& engine, Communicator& comm,
                                const CheckpointRun& run) {
  const Status checked = CheckStepDirectory(candidate.path, candidate.step, comm.rank(), comm.world_size());
  DSLAUNCH_RETURN_IF_ERROR(AgreeOnFailureWithReason(comm, checked, "check checkpoint " + candidate.path));
  return LoadCheckpoint(candidate.path, engine, comm, run);
}

}  // namespace

Result<std::string> ResolveCheckpointPath(const std::string& path) {
  std::error_code ec;
  if (fs::exists(fs::path(path) / kMetaFileName, ec)) return path;
  if (!fs::is_directory(path, ec)) return NotFoundError("checkpoint.load: " + path + " does not exist");
  const fs::path latest = fs::path(path) / kLatestFileName;
  if (!fs::exists(latest, ec)) {
    return NotFoundError(path + " has neither meta.json nor a `latest` file: not a checkpoint");
  }
  DSLAUNCH_ASSIGN_OR_RETURN(std::string text, ReadFile(latest.string()));
  const std::optional<std::string> name = ParseLatestFileText(text);
  if (!name) return DataLossError(latest.string() + ": does not name a checkpoint directory");
  const fs::path target = fs::path(path) / *name;
  if (!fs::exists(target / kMetaFileName, ec)) {
    return DataLossError(latest.string() + " names " + target.string() + ", which has no meta.json (incomplete)");
  }
  return target.string();
}

Result<ResumePlan> PlanCheckpointResume(const CheckpointConfig& config) {
  CheckpointDirectoryListing listing;
  if (!config.dir.empty()) {
    DSLAUNCH_ASSIGN_OR_RETURN(listing, ListCheckpointDirectory(config.dir));
  }
  const Result<std::string> explicit_path = config.load == CheckpointLoad::kPath
                                                ? ResolveCheckpointPath(config.load_path)
                                                : Result<std::string>(NotFoundError("checkpoint.load names no path"));
  DSLAUNCH_ASSIGN_OR_RETURN(ResumePlan plan, PlanResume(config, listing, explicit_path));
  if (plan.mode == ResumeMode::kExplicit) {  // a global_step<N> name is checked against its meta.json
    ResumeCandidate& only = plan.candidates.front();
    only.step = ParseStepDirectoryName(fs::path(only.path).lexically_normal().filename().string()).value_or(-1);
  }
  return plan;
}

Result<ResumeOutcome> ResumeFromPlan(const ResumePlan& plan, Engine& engine, Communicator& comm,
                                     const CheckpointRun& run, const SkippedCheckpoint& skipped) {
  DSLAUNCH_RETURN_IF_ERROR(AgreeOnPlan(comm, plan));
  if (plan.mode == ResumeMode::kFresh) return ResumeOutcome{};
  std::optional<Status> newest_failure;
  for (const ResumeCandidate& candidate : plan.candidates) {
    Result<LoadResult> loaded = TryCandidate(candidate, engine, comm, run);
    if (loaded.ok()) return ResumeOutcome{std::move(*loaded), candidate.path};
    const Status& why = loaded.status();
    if (!comm.health().ok() || !IsDamage(why)) return why;
    if (plan.mode == ResumeMode::kExplicit) {
      return Status(why.code(), why.message() + "; checkpoint.load names " + candidate.path +
                                    ", so no other checkpoint is tried: set checkpoint.load to another one, or to "
                                    "\"auto\" to resume from the newest complete one in checkpoint.dir");
    }
    if (skipped) skipped(candidate.path, why.message());
    if (!newest_failure) newest_failure = why;
  }
  // kNewest and nothing loaded: the directory held checkpoints (or a `latest`), so step 0 would
  // overwrite what may be the only copy of the run's progress.
  std::string what;
  if (newest_failure) {
    what = "none of the " + std::to_string(plan.candidates.size()) + " checkpoints there can be resumed (the newest, " +
           plan.candidates[0].path + ": " + newest_failure->message() + ")";
  } else {
    what = plan.scan_reason + ", and no step directory there has meta.json";
  }
  return FailedPreconditionError(
      "checkpoint resume: " + what +
      ". Not starting at step 0 over them: move the checkpoint directory away (or set another checkpoint.dir) "
      "to start fresh, or set checkpoint.load to the checkpoint to start from");
}

}  // namespace dslaunch::runtime
