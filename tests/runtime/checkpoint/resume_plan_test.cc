// PlanResume (runtime/checkpoint/resume_plan.h): which checkpoints a run tries, in which order,
// and when it refuses to start at step 0, from listings written by hand.
#include "runtime/checkpoint/resume_plan.h"

#include <doctest/doctest.h>

namespace dslaunch::runtime {
namespace {

using Entry = CheckpointDirectoryListing::StepEntry;

// /ckpt with `latest` naming `latest` ("" : no `latest` file) and the step directories given.
CheckpointDirectoryListing Listing(const std::string& latest, std::vector<Entry> steps) {
  CheckpointDirectoryListing l;
  l.dir = "/ckpt";
  l.latest_exists = !latest.empty();
  if (!latest.empty()) l.latest_name = latest;
  l.steps = std::move(steps);
  return l;
}

CheckpointConfig Auto() {
  CheckpointConfig c;
  c.dir = "/ckpt";
  c.load = CheckpointLoad::kLatest;
  return c;
}

std::vector<int64_t> Steps(const ResumePlan& plan) {
  std::vector<int64_t> steps;
  for (const auto& c : plan.candidates) {
    CHECK(c.path == "/ckpt/global_step" + std::to_string(c.step));
    steps.push_back(c.step);
  }
  return steps;
}

const Result<std::string> kNoPath = NotFoundError("unused");

TEST_CASE("PlanResume follows `latest` and then the older checkpoints, or scans when `latest` is not usable") {
  const std::vector<Entry> three = {{6, true}, {4, true}, {2, true}};
  struct Case {
    const char* what;
    CheckpointDirectoryListing listing;
    std::vector<int64_t> candidates;
    std::string scan_reason;
  };
  CheckpointDirectoryListing unreadable = Listing("", three);
  unreadable.latest_exists = true;
  unreadable.latest_problem = "does not name a checkpoint directory";
  const Case cases[] = {
      {"latest names the newest", Listing("global_step6", three), {6, 4, 2}, ""},
      // A crash between meta.json and `latest`: `latest` is the commit point, the newer one waits.
      {"latest names an older one", Listing("global_step4", three), {4, 2}, ""},
      {"latest missing", Listing("", three), {6, 4, 2}, "/ckpt/latest is missing"},
      {"latest unreadable", unreadable, {6, 4, 2}, "/ckpt/latest does not name a checkpoint directory"},
      {"latest names a directory that is gone", Listing("global_step8", three), {6, 4, 2},
       "/ckpt/latest names global_step8, which does not exist"},
      {"latest names another entry", Listing("global_step08", three), {6, 4, 2},
       "/ckpt/latest names global_step08, which is not a step directory"},
      {"latest names an unfinished save", Listing("global_step8", {{8, false}, {6, true}, {4, true}, {2, true}}),
       {6, 4, 2}, "/ckpt/latest names global_step8, which has no meta.json (a save that did not finish)"},
      {"unfinished ones are never candidates", Listing("", {{9, false}, {6, true}, {5, false}}), {6},
       "/ckpt/latest is missing"},
      {"latest but nothing with meta.json", Listing("global_step4", {{4, false}}), {},
       "/ckpt/latest names global_step4, which has no meta.json (a save that did not finish)"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    for (bool restart : {false, true}) {
      CAPTURE(restart);
      CheckpointConfig config = Auto();
      if (restart) {  // generation > 0 without `load`: the same plan
        config.load = CheckpointLoad::kNone;
        config.resume_newest = true;
      }
      Result<ResumePlan> plan = PlanResume(config, c.listing, kNoPath);
      REQUIRE_MESSAGE(plan.ok(), plan.status().ToString());
      CHECK(plan->mode == ResumeMode::kNewest);
      CHECK(Steps(*plan) == c.candidates);
      CHECK(plan->scan_reason == c.scan_reason);
      CHECK(plan->restart == restart);
    }
  }
}

TEST_CASE("PlanResume starts fresh only where step 0 overwrites no checkpoint") {
  // `load: auto` over a directory with nothing but a crash's leftovers: step 0.
  Result<ResumePlan> plan = PlanResume(Auto(), Listing("", {{5, false}, {3, false}}), kNoPath);
  REQUIRE(plan.ok());
  CHECK(plan->mode == ResumeMode::kFresh);
  CHECK(plan->candidates.empty());

  // No `load` at generation 0: the same over leftovers, refused over checkpoints or a `latest`.
  CheckpointConfig none;
  none.dir = "/ckpt";
  plan = PlanResume(none, Listing("", {{5, false}}), kNoPath);
  REQUIRE(plan.ok());
  CHECK(plan->mode == ResumeMode::kFresh);
  const std::string what_to_do =
      ") and checkpoint.load is not set: a run from step 0 would overwrite them. Set checkpoint.load to \"auto\" to "
      "resume from the newest, or move /ckpt away (or set another checkpoint.dir) to start fresh";
  plan = PlanResume(none, Listing("global_step550", {{600, false}, {550, true}, {50, true}}), kNoPath);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().code() == StatusCode::kFailedPrecondition);
  CHECK(plan.status().message() ==
        "checkpoint.dir /ckpt already holds checkpoints (newest: /ckpt/global_step550" + what_to_do);
  plan = PlanResume(none, Listing("global_step550", {}), kNoPath);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().message() == "checkpoint.dir /ckpt already holds checkpoints (/ckpt/latest" + what_to_do);
  // Without a dir nothing is saved: nothing to protect.
  plan = PlanResume(CheckpointConfig{}, Listing("", {}), kNoPath);
  REQUIRE(plan.ok());
  CHECK(plan->mode == ResumeMode::kFresh);

  CheckpointConfig no_dir = Auto();
  no_dir.dir.clear();
  plan = PlanResume(no_dir, CheckpointDirectoryListing{}, kNoPath);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().message() == "checkpoint.load \"auto\" needs checkpoint.dir");
}

TEST_CASE("PlanResume takes an explicit path alone, and at a restart only until dir holds a checkpoint") {
  CheckpointConfig c;
  c.dir = "/ckpt";
  c.load = CheckpointLoad::kPath;
  c.load_path = "/pretrained";
  const Result<std::string> pretrained = std::string("/pretrained/global_step100");
  Result<ResumePlan> plan = PlanResume(c, Listing("", {}), pretrained);
  REQUIRE(plan.ok());
  CHECK(plan->mode == ResumeMode::kExplicit);
  REQUIRE(plan->candidates.size() == 1);
  CHECK(plan->candidates[0].path == "/pretrained/global_step100");
  // Generation 0 with a path may rewind inside its own dir: an explicit choice, not refused.
  plan = PlanResume(c, Listing("global_step6", {{6, true}}), pretrained);
  REQUIRE(plan.ok());
  CHECK(plan->mode == ResumeMode::kExplicit);
  // A path that does not resolve is the error.
  plan = PlanResume(c, Listing("", {}), NotFoundError("checkpoint.load: /pretrained does not exist"));
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().message() == "checkpoint.load: /pretrained does not exist");
  // A restart: dir's own checkpoints win once there are any.
  c.resume_newest = true;
  plan = PlanResume(c, Listing("", {{3, false}}), pretrained);
  REQUIRE(plan.ok());
  CHECK(plan->mode == ResumeMode::kExplicit);
  plan = PlanResume(c, Listing("global_step6", {{6, true}}), pretrained);
  REQUIRE(plan.ok());
  CHECK(plan->mode == ResumeMode::kNewest);
  CHECK(Steps(*plan) == std::vector<int64_t>{6});
}

TEST_CASE("PlanFingerprint tells plans with other candidates apart") {
  const ResumePlan a = *PlanResume(Auto(), Listing("global_step6", {{6, true}, {4, true}}), kNoPath);
  const ResumePlan same = *PlanResume(Auto(), Listing("", {{6, true}, {4, true}}), kNoPath);
  const ResumePlan fewer = *PlanResume(Auto(), Listing("global_step6", {{6, true}}), kNoPath);
  const ResumePlan fresh = *PlanResume(Auto(), Listing("", {}), kNoPath);
  CHECK(PlanFingerprint(a) == PlanFingerprint(same));  // how `latest` was read does not matter
  CHECK(PlanFingerprint(a) != PlanFingerprint(fewer));
  CHECK(PlanFingerprint(a) != PlanFingerprint(fresh));
}

}  // namespace
}  // namespace dslaunch::runtime
