// The resume of every piece of engine state (docs/checkpoint.md, "Tests"): a
// checkpoint taken at a step where the loss scaler (scale, clean steps since the last overflow,
// hysteresis left), the learning-rate schedule's position, the optimizer's step count and the data
// order all differ from their initial values resumes into bitwise the steps of the uninterrupted
// run, in fp16, bf16 and fp32, and its final checkpoint has the same bytes.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/checkpoint/names.h"
#include "runtime/train/trainer.h"
#include "tests/fakes/train_on_threads.h"
#include "tests/runtime/tiny_gpt_config.h"
#include "tests/support/proc_checks.h"
#include "tests/support/subprocess.h"

namespace dslaunch::runtime {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kSteps = 10;
constexpr int64_t kSavedAt = 4;

// One run's precision, stage and fp16 scaler, and the scaler's state saved at step 4 (fp16).
// The scales are this model's at world size 2 (a scale of 2^18 overflows its fp16 backward in
// some steps): each was found by running it, and the test checks the state it relies on.
struct Case {
  int stage;
  Precision precision;
  int scale_power = 16;
  int hysteresis = 2;
  int64_t window = 1000;
  // The saved scaler: scale, last overflow, hysteresis left.
  double scale = 0;
  int64_t last_overflow = 0;
  int64_t hysteresis_left = 0;
  const char* why = "";
};

const Case kCases[] = {
    // Overflows at steps 1 and 2 (the first spends the hysteresis, the second halves the scale),
    // then clean steps: after the resume the scale doubles on the third clean step since the
    // overflow, which only a restored iteration and last overflow put after step 6.
    {1, Precision::kFp16, 18, 2, 3, 131072.0, 1, 1, "clean steps follow the save"},
    {3, Precision::kFp16, 18, 2, 3, 131072.0, 1, 1, "clean steps follow the save"},
    // The scale doubles after step 3 and overflows at steps 4-6: the save at 4 has spent one of
    // three overflows, and only a restored hysteresis halves the scale at step 6, not later.
    {1, Precision::kFp16, 17, 3, 2, 262144.0, 3, 2, "overflows follow the save"},
    {2, Precision::kBf16},
    {0, Precision::kFp32},
    {3, Precision::kFp32},
};

TrainConfig Config(const Case& t, const std::string& dir) {
  TrainConfig c = TinyGptConfig(2, t.stage, kSteps);
  c.engine.precision = t.precision;
  c.engine.loss_scaler.initial_scale_power = t.scale_power;
  c.engine.loss_scaler.hysteresis = t.hysteresis;
  c.engine.loss_scaler.loss_scale_window = t.window;
  // The rate changes at every step: a schedule resumed one step off shows in every record.
  c.engine.schedule.kind = LrScheduleKind::kWarmupDecayLr;
  c.engine.schedule.warmup_min_lr = 1e-3;
  c.engine.schedule.warmup_max_lr = 5e-3;
  c.engine.schedule.warmup_num_steps = 3;
  c.engine.schedule.warmup_type = WarmupType::kLinear;
  c.engine.schedule.total_num_steps = kSteps;
  c.checkpoint.dir = dir;
  c.checkpoint.interval = kSavedAt;
  return c;
}

struct Steps {
  std::vector<double> losses;        // bitwise, from TrainResult
  std::vector<std::string> records;  // rank 0's step records less their times
};

Steps Run(const TrainConfig& config) {
  Steps steps;
  auto results = testing::TrainOnThreads(2, config, testing::PatternTokens(false), [&](int rank) {
    TrainHooks hooks;
    if (rank == 0) {
      hooks.metrics = [&](const std::string& line) {
        json record = json::parse(line);
        if (record.value("event", "") != "step") return;
        record.erase("tokens_per_s");
        record.erase("ms_per_step");
        record.erase("rank_step_ms");
        record.erase("rank_collective_ms");
        steps.records.push_back(record.dump());
      };
    }
    return hooks;
  });
  REQUIRE_MESSAGE(results[0].ok(), results[0].status().ToString());
  REQUIRE(results[1].ok());
  steps.losses = results[0]->losses;
  return steps;
}

TEST_CASE("Every piece of engine state resumes: the steps after a checkpoint taken mid-warm-up, after overflows, "
          "are bitwise the uninterrupted run's in fp16, bf16 and fp32, and so are the final checkpoint's bytes") {
  for (const Case& t : kCases) {
    CAPTURE(t.stage);
    CAPTURE(PrecisionName(t.precision));
    CAPTURE(t.why);
    dslaunch::testing::TempDir dir;
    const TrainConfig full_config = Config(t, dir.path() + "/full");
    const Steps full = Run(full_config);
    REQUIRE(full.records.size() == static_cast<size_t>(kSteps));

    // The saved state is not the initial one in any part.
    const fs::path saved = fs::path(full_config.checkpoint.dir) / StepDirectoryName(kSavedAt);
    const json meta = json::parse(dslaunch::testing::ReadWhole(saved / "meta.json"));
    INFO(meta.dump());
    CHECK(meta.at("lr_scheduler").at("last_batch_iteration").get<int64_t>() >= 1);  // -1 at the start
    CHECK(meta.at("optimizer_step").get<int64_t>() >= 2);                           // 0 at the start
    CHECK(meta.at("samples_seen").get<int64_t>() == kSavedAt * 8);                  // the data order's position
    if (t.precision == Precision::kFp16) {
      const json& scaler = meta.at("loss_scaler");
      CHECK(scaler.at("scale").get<double>() == t.scale);
      CHECK(scaler.at("scale").get<double>() != std::ldexp(1.0, t.scale_power));
      CHECK(scaler.at("iteration").get<int64_t>() == kSavedAt);
      CHECK(scaler.at("last_overflow_iteration").get<int64_t>() == t.last_overflow);
      CHECK(scaler.at("hysteresis_left").get<int64_t>() == t.hysteresis_left);
      CHECK(scaler.at("hysteresis_left").get<int64_t>() != t.hysteresis);
      CHECK(meta.at("optimizer_step").get<int64_t>() < kSavedAt);  // skipped steps are not counted
    }

    TrainConfig resumed_config = full_config;
    resumed_config.checkpoint.dir = dir.path() + "/resumed";
    resumed_config.checkpoint.load = CheckpointLoad::kPath;
    resumed_config.checkpoint.load_path = saved.string();
    const Steps resumed = Run(resumed_config);
    REQUIRE(resumed.records.size() == static_cast<size_t>(kSteps - kSavedAt));
    for (size_t i = 0; i < resumed.records.size(); ++i) {
      CAPTURE(i);
      CHECK(resumed.losses[i] == full.losses[kSavedAt + i]);  // bitwise
      CHECK(resumed.records[i] == full.records[kSavedAt + i]);
    }
    // The end-of-run checkpoints: every shard (master weights, moments, 16-bit parameters) and
    // meta.json (scaler, schedule, step counts, data position, checksums) byte for byte.
    const fs::path end_full = fs::path(full_config.checkpoint.dir) / StepDirectoryName(kSteps);
    const fs::path end_resumed = fs::path(resumed_config.checkpoint.dir) / StepDirectoryName(kSteps);
    CHECK(dslaunch::testing::ReadWhole(end_resumed / "meta.json") == dslaunch::testing::ReadWhole(end_full / "meta.json"));
    for (int rank = 0; rank < 2; ++rank) {
      CAPTURE(rank);
      const std::string shard = dslaunch::testing::ReadWhole(end_full / ShardFileName(rank));
      CHECK_FALSE(shard.empty());
      CHECK(dslaunch::testing::ReadWhole(end_resumed / ShardFileName(rank)) == shard);
    }
  }
}

}  // namespace
}  // namespace dslaunch::runtime
