// The training loop with the model split into pipeline stages and over tensor ranks
// (docs/parallelism.md) on in-process ranks: against the data-parallel run of the same global
// batch, on the same data.
#include "runtime/train/trainer.h"

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/fakes/train_on_threads.h"
#include "tests/runtime/train/grid_gpt_config.h"

namespace dslaunch::runtime {
namespace {

// The grid GPT on 2 data-parallel copies: 4 micro-batches of 2 sequences a step.
TrainConfig Config(int stages, int zero_stage, int tensor = 1) { return GridGptConfig(stages, tensor, 2, zero_stage); }

// Trains `config` on stages x 2 x tensor ranks threads, each rank with its grid's groups.
std::vector<Result<TrainResult>> TrainPipelined(const TrainConfig& config, std::vector<std::string>* rank0_lines) {
  const int world = config.pipeline.stages * 2 * config.tensor_parallel.size;
  return testing::TrainOnGrid(world, config, testing::PatternTokens(/*validation=*/true), [rank0_lines](int r) {
    TrainHooks hooks;
    if (r == 0 && rank0_lines != nullptr) hooks.print = [rank0_lines](const std::string& l) { rank0_lines->push_back(l); };
    return hooks;
  });
}

TEST_CASE("Trained on 2 and 4 pipeline stages x 2 data-parallel copies, the losses are the data-parallel run's") {
  for (int zero_stage : {0, 1}) {
    const auto reference = testing::TrainOnThreads(2, Config(1, zero_stage), testing::PatternTokens(true));
    REQUIRE(reference[0].ok());
    const TrainResult& want = *reference[0];
    for (int stages : {2, 4}) {
      CAPTURE(zero_stage);
      CAPTURE(stages);
      std::vector<std::string> lines;
      const auto results = TrainPipelined(Config(stages, zero_stage), &lines);
      for (const auto& r : results) REQUIRE_MESSAGE(r.ok(), r.status().ToString());
      const TrainResult& got = *results[0];
      REQUIRE(got.losses.size() == want.losses.size());
      // The first step starts from the same values through the same kernels: the same bits.
      CHECK(std::memcmp(&got.losses[0], &want.losses[0], sizeof(double)) == 0);
      for (size_t i = 0; i < want.losses.size(); ++i) {
        CAPTURE(i);
        CHECK(got.losses[i] == doctest::Approx(want.losses[i]).epsilon(1e-5));
      }
      CHECK(got.val_loss == doctest::Approx(want.val_loss).epsilon(1e-5));
      // Every rank reports the same losses.
      for (const auto& r : results) CHECK(r->losses == got.losses);
    }
  }
}

TEST_CASE("A pipelined run in fp16 and bf16 with recomputed blocks follows the data-parallel run") {
  for (Precision precision : {Precision::kFp16, Precision::kBf16}) {
    const std::string name(PrecisionName(precision));
    CAPTURE(name);
    auto config_for = [&](int stages) {
      TrainConfig c = Config(stages, 1);
      c.engine.precision = precision;
      std::get<GptConfig>(c.model).recompute_blocks = 3;  // all of stage 0's blocks, one of stage 1's
      return c;
    };
    const auto reference = testing::TrainOnThreads(2, config_for(1), testing::PatternTokens(true));
    REQUIRE(reference[0].ok());
    const auto results = TrainPipelined(config_for(2), nullptr);
    for (const auto& r : results) REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    const TrainResult& got = *results[0];
    const TrainResult& want = *reference[0];
    REQUIRE(got.losses.size() == want.losses.size());
    // The same 16-bit parameters at the start: the first loss to the bit.
    CHECK(std::memcmp(&got.losses[0], &want.losses[0], sizeof(double)) == 0);
    // Later, wte's gradient rounds differently once per step, and its 16-bit storage may round the
    // difference up to one unit of its last place.
    for (size_t i = 0; i < want.losses.size(); ++i) {
      CAPTURE(i);
      CHECK(got.losses[i] == doctest::Approx(want.losses[i]).epsilon(1e-3));
    }
  }
}

TEST_CASE("A pipelined model samples the data-parallel model's text from the same parameters") {
  // lr 0: the parameters stay the initial ones on both, so the logits are the same bits.
  auto config_for = [](int stages) {  // with tensor ranks: the whole row of logits gathered
    TrainConfig c = Config(stages, 1);
    c.engine.optimizer.lr = 0;
    c.train.steps = 1;
    c.train.sample_tokens = 40;
    c.train.sample_prompt = "ab";
    return c;
  };
  std::vector<std::string> whole_lines;
  const auto reference = testing::TrainOnThreads(2, config_for(1), testing::PatternTokens(true), [&](int rank) {
    TrainHooks hooks;
    if (rank == 0) hooks.print = [&](const std::string& l) { whole_lines.push_back(l); };
    return hooks;
  });
  REQUIRE(reference[0].ok());
  for (auto [stages, tensor] : {std::pair{2, 1}, std::pair{4, 1}, std::pair{1, 2}, std::pair{2, 2}}) {
    CAPTURE(stages);
    CAPTURE(tensor);
    std::vector<std::string> lines;
    TrainConfig config = config_for(stages);
    config.tensor_parallel.size = tensor;
    const auto results = TrainPipelined(config, &lines);
    for (const auto& r : results) REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    auto sample = [](const std::vector<std::string>& all) {
      for (const std::string& l : all) {
        if (l.rfind("sample:", 0) == 0) return l;
      }
      return std::string();
    };
    const std::string want = sample(whole_lines);
    REQUIRE(want.size() > std::string("sample:\n").size());  // 40 tokens, control bytes escaped
    CHECK(sample(lines) == want);
  }
}

// Tensor ranks sum partial products where the whole model makes one: the losses follow the
// data-parallel run's within fp32 reassociation (docs/parallelism.md, "Tolerance").
void CheckFollowsDataParallel(const TrainResult& got, const TrainResult& want, double tolerance) {
  REQUIRE(got.losses.size() == want.losses.size());
  for (size_t i = 0; i < want.losses.size(); ++i) {
    CAPTURE(i);
    CHECK(got.losses[i] == doctest::Approx(want.losses[i]).epsilon(tolerance));
  }
  CHECK(got.val_loss == doctest::Approx(want.val_loss).epsilon(tolerance));
}

TEST_CASE("Trained on 2 and 4 tensor ranks x 2 data-parallel copies, at ZeRO 0, 1 and 3, the losses follow the "
          "data-parallel run's") {
  for (int zero_stage : {0, 1, 3}) {
    // Clipped at every step: the whole model's norm, each whole tensor counted once, decides it.
    auto config_for = [&](int tensor) {
      TrainConfig c = Config(1, zero_stage, tensor);
      c.engine.gradient_clipping = 0.05;
      return c;
    };
    const auto reference = testing::TrainOnThreads(2, config_for(1), testing::PatternTokens(true));
    REQUIRE(reference[0].ok());
    for (int tensor : {2, 4}) {
      CAPTURE(zero_stage);
      CAPTURE(tensor);
      const auto results = TrainPipelined(config_for(tensor), nullptr);
      for (const auto& r : results) REQUIRE_MESSAGE(r.ok(), r.status().ToString());
      CheckFollowsDataParallel(*results[0], *reference[0], 1e-5);
      for (const auto& r : results) CHECK(r->losses == results[0]->losses);  // every rank reports them
    }
  }
}

TEST_CASE("Trained on 2 stages x 2 data-parallel copies x 2 tensor ranks (8 ranks), in fp32 and bf16, the losses "
          "follow the data-parallel run's") {
  for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
    const std::string name(PrecisionName(precision));
    CAPTURE(name);
    auto config_for = [&](int stages, int tensor) {
      TrainConfig c = Config(stages, 1, tensor);
      c.engine.precision = precision;
      c.engine.gradient_clipping = 0.05;  // the norm over every part decides the clipping
      return c;
    };
    const auto reference = testing::TrainOnThreads(2, config_for(1, 1), testing::PatternTokens(true));
    REQUIRE(reference[0].ok());
    const auto results = TrainPipelined(config_for(2, 2), nullptr);
    for (const auto& r : results) REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    CheckFollowsDataParallel(*results[0], *reference[0], precision == Precision::kFp32 ? 1e-5 : 1e-3);
  }
}

}  // namespace
}  // namespace dslaunch::runtime
