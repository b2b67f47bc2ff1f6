#include "runtime/checkpoint/resume_plan.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "common/crc32c.h"
#include "runtime/checkpoint/names.h"

namespace dslaunch::runtime {
namespace {

// What the listing shows a step-0 run would overwrite: the newest step directory with meta.json,
// else `latest`; empty when there is nothing.
std::string Evidence(const CheckpointDirectoryListing& dir) {
  for (const auto& entry : dir.steps) {
    if (entry.has_meta) return "newest: " + PathIn(dir.dir, StepDirectoryName(entry.step));
  }
  return dir.latest_exists ? PathIn(dir.dir, kLatestFileName) : "";
}

// kNewest's order: what `latest` names and the older ones, or (without a usable `latest`)
// every step directory with meta.json; newest first.
void PlanNewest(const CheckpointDirectoryListing& dir, ResumePlan& plan) {
  plan.mode = ResumeMode::kNewest;
  const std::string latest = PathIn(dir.dir, kLatestFileName);
  std::optional<int64_t> latest_step;
  if (!dir.latest_exists) {
    plan.scan_reason = latest + " is missing";
  } else if (!dir.latest_name) {
    plan.scan_reason = latest + " " + dir.latest_problem;
  } else {
    const std::optional<int64_t> named = ParseStepDirectoryName(*dir.latest_name);
    auto entry = std::find_if(dir.steps.begin(), dir.steps.end(), [&](const auto& e) { return named == e.step; });
    const std::string what = latest + " names " + *dir.latest_name;
    if (!named) {
      plan.scan_reason = what + ", which is not a step directory";
    } else if (entry == dir.steps.end()) {
      plan.scan_reason = what + ", which does not exist";
    } else if (!entry->has_meta) {
      plan.scan_reason = what + ", which has no meta.json (a save that did not finish)";
    } else {
      latest_step = named;
    }
  }
  for (const auto& entry : dir.steps) {  // newest first
    if (!entry.has_meta || (latest_step && entry.step > *latest_step)) continue;
    plan.candidates.push_back({PathIn(dir.dir, StepDirectoryName(entry.step)), entry.step});
  }
}

}  // namespace

Result<ResumePlan> PlanResume(const CheckpointConfig& config, const CheckpointDirectoryListing& dir,
                              const Result<std::string>& explicit_path) {
  if (config.load == CheckpointLoad::kLatest && config.dir.empty()) {
    return InvalidArgumentError("checkpoint.load \"auto\" needs checkpoint.dir");
  }
  ResumePlan plan;
  plan.restart = config.resume_newest;
  const std::string evidence = config.dir.empty() ? "" : Evidence(dir);
  const bool newest = config.load == CheckpointLoad::kLatest || config.resume_newest;
  if (newest && !config.dir.empty() && !evidence.empty()) {
    PlanNewest(dir, plan);
    return plan;
  }
  if (config.load == CheckpointLoad::kPath) {  // generation 0, or a restart before dir held anything
    if (!explicit_path.ok()) return explicit_path.status();
    plan.mode = ResumeMode::kExplicit;
    plan.candidates.push_back({*explicit_path, -1});
    return plan;
  }
  if (!newest && !evidence.empty()) {
    return FailedPreconditionError("checkpoint.dir " + config.dir + " already holds checkpoints (" + evidence +
                                   ") and checkpoint.load is not set: a run from step 0 would overwrite them. "
                                   "Set checkpoint.load to \"auto\" to resume from the newest, or move " +
                                   config.dir + " away (or set another checkpoint.dir) to start fresh");
  }
  return plan;
}

int64_t PlanFingerprint(const ResumePlan& plan) {
  // The mode, then each candidate's path, each ended by a NUL (no path holds one).
  uint32_t crc = Crc32c(std::to_string(static_cast<int>(plan.mode)) + '\0');
  for (const ResumeCandidate& c : plan.candidates) crc = Crc32c(c.path + '\0', crc);
  return crc;
}

}  // namespace dslaunch::runtime
