// The grad_norm the trainer reports (metrics.jsonl's step records, docs/engine.md "Metrics")
// against the norm of the rank-averaged gradient computed here: the same model and micro-batches
// run on a flat parameter buffer outside the engine, the ranks' gradients averaged and squared
// in double. A wrong reduction, norm, unscaling or report shows.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "runtime/train/train_task.h"
#include "runtime/train/trainer.h"
#include "tests/fakes/flat_parameter_access.h"
#include "tests/fakes/train_on_threads.h"

namespace dslaunch::runtime {
namespace {

constexpr int kWorld = 2;

TrainConfig Config(int stage, Precision precision) {
  TrainConfig c;
  c.batch.train_batch_size = 8;
  c.batch.micro_batch_per_gpu = 2;
  c.batch.gradient_accumulation_steps = 2;
  c.engine.optimizer.kind = OptimizerKind::kAdamW;
  c.engine.optimizer.lr = 3e-3;
  c.engine.gradient_clipping = 0.5;  // the reported norm is the one before clipping
  c.model = GptConfig{2, 2, 16, 8, 32};
  c.data.seq_len = 8;
  c.train.steps = 1;
  c.steps_per_print = 1;
  c.seed = 5;
  c.engine.zero.stage = stage;
  c.engine.zero.reduce_bucket_size = 4000;
  c.engine.precision = precision;
  return c;
}

// sqrt(sum_i (mean over ranks of rank r's gradient of its mean loss)^2), from the first step's
// micro-batches, in double.
double IndependentGradNorm(const TrainConfig& config, const TrainData& data) {
  std::vector<double> sum;
  const int accumulation = static_cast<int>(config.batch.gradient_accumulation_steps);
  for (int rank = 0; rank < kWorld; ++rank) {
    auto task = TrainTask::Create(config, data, rank, kWorld);
    REQUIRE_MESSAGE(task.ok(), task.status().ToString());
    std::vector<float> params((*task)->layout().numel()), grads(params.size(), 0.0f);
    (*task)->InitParameters(params, config.seed);
    dslaunch::testing::FlatParameterAccess access((*task)->layout(), params, grads);
    for (int m = 0; m < accumulation; ++m) {
      (*task)->ForwardTrain(access, /*step=*/0, m);
      (*task)->Backward(access, 1.0f / static_cast<float>(accumulation));
    }
    sum.resize(grads.size(), 0.0);
    for (size_t i = 0; i < grads.size(); ++i) sum[i] += grads[i];
  }
  double squares = 0.0;
  for (double g : sum) squares += (g / kWorld) * (g / kWorld);
  return std::sqrt(squares);
}

TEST_CASE("The grad_norm of the step record is the norm of the rank-averaged gradient, summed independently") {
  const TrainData data = testing::PatternTokens(/*validation=*/false);
  struct Case {
    int stage;
    Precision precision;
    // fp32: the engine's and this sum differ only in the order of additions (~1e-7 relative).
    // fp16: the engine's gradients are stored in fp16 (11 significant bits), so each element is
    // within 2^-11 relative of the fp32 one, and so is the norm.
    double relative_tolerance;
  };
  for (const Case& c : {Case{0, Precision::kFp32, 1e-6}, Case{3, Precision::kFp32, 1e-6},
                        Case{2, Precision::kFp16, 1.0 / 2048}}) {
    CAPTURE(c.stage);
    CAPTURE(PrecisionName(c.precision));
    const TrainConfig config = Config(c.stage, c.precision);
    std::vector<std::string> records;
    auto results = testing::TrainOnThreads(kWorld, config, data, [&](int) {
      TrainHooks hooks;
      hooks.metrics = [&](const std::string& json) { records.push_back(json); };  // rank 0 only
      return hooks;
    });
    for (auto& r : results) REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    double reported = -1.0;
    for (const std::string& line : records) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (j.at("event") == "step") {
        REQUIRE(j.at("step") == 1);
        CHECK(j.at("skipped") == false);
        reported = j.at("grad_norm").get<double>();
      }
    }
    const double expected = IndependentGradNorm(config, data);
    CAPTURE(reported);
    CAPTURE(expected);
    CHECK(expected > 0.5);  // clipping is triggered: the reported norm must be the unclipped one
    CHECK(std::abs(reported - expected) <= c.relative_tolerance * expected);
  }
}

TEST_CASE("Every step record holds each rank's step time and time in collectives, rank 0's first") {
  constexpr int kRanks = 3;
  TrainConfig config = Config(1, Precision::kFp32);
  config.batch.train_batch_size = 12;
  config.train.steps = 3;
  std::vector<std::string> records;
  auto results = testing::TrainOnThreads(kRanks, config, testing::PatternTokens(/*validation=*/false), [&](int) {
    TrainHooks hooks;
    hooks.metrics = [&](const std::string& json) { records.push_back(json); };  // rank 0 only
    return hooks;
  });
  for (auto& r : results) REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  int steps = 0;
  for (const std::string& line : records) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.at("event") != "step") continue;
    ++steps;
    CAPTURE(line);
    const std::vector<double> ranks = j.at("rank_step_ms").get<std::vector<double>>();
    const std::vector<double> collective = j.at("rank_collective_ms").get<std::vector<double>>();
    REQUIRE(ranks.size() == kRanks);
    REQUIRE(collective.size() == kRanks);
    for (int r = 0; r < kRanks; ++r) {
      CHECK(ranks[r] > 0.0);
      CHECK(collective[r] > 0.0);  // the step's reduce-scatter, all-gather and loss all-reduce
      CHECK(collective[r] <= ranks[r]);
    }
    // Rank 0's own time, gathered as a float (7 significant digits): the ranks' times differ by
    // far more than that, so another rank's value in slot 0 shows.
    CHECK(ranks[0] == doctest::Approx(j.at("ms_per_step").get<double>()).epsilon(1e-6));
  }
  CHECK(steps == 3);
}

}  // namespace
}  // namespace dslaunch::runtime
