// Activation checkpointing through the whole training loop (docs/engine.md, "Recomputation"): at
// every ZeRO stage and precision, on 2 in-process ranks, a run that recomputes its blocks has
// bitwise the losses and validation loss of the run that keeps their activations.
#include <doctest/doctest.h>

#include <cstring>

#include "runtime/train/trainer.h"
#include "tests/fakes/train_on_threads.h"

namespace dslaunch::runtime {
namespace {

TrainConfig Config(int stage, Precision precision, int recompute_blocks) {
  TrainConfig c;
  c.batch = {8, 2, 2};  // 2 ranks x micro-batch 2 x accumulation 2
  c.engine.optimizer.kind = OptimizerKind::kAdamW;
  c.engine.optimizer.lr = 3e-3;
  c.engine.gradient_clipping = 1.0;
  GptConfig gpt{3, 2, 16, 8, 32};
  gpt.recompute_blocks = recompute_blocks;
  c.model = gpt;
  c.data.seq_len = 8;
  c.train.steps = 8;
  c.train.eval_steps = 2;
  c.seed = 11;
  // Small buckets so stages 2-3 reduce and gather in several pieces, as in trainer_test.cc.
  c.engine.zero.stage = stage;
  c.engine.zero.reduce_bucket_size = 4000;
  c.engine.zero.allgather_bucket_size = 2500;
  c.engine.zero.stage3_prefetch_bucket_size = 7000;
  c.engine.zero.stage3_param_persistence_threshold = 100;
  c.engine.precision = precision;
  return c;
}

TrainResult RunRank0(const TrainConfig& config) {
  auto results = testing::TrainOnThreads(2, config, testing::PatternTokens(/*validation=*/true));
  REQUIRE_MESSAGE(results[0].ok(), results[0].status().ToString());
  return *results[0];
}

TEST_CASE("Recomputing blocks leaves the losses of a run bitwise unchanged at every stage and precision") {
  for (Precision precision : {Precision::kFp32, Precision::kFp16, Precision::kBf16}) {
    for (int stage : {0, 1, 2, 3}) {
      CAPTURE(PrecisionName(precision));
      CAPTURE(stage);
      const TrainResult kept = RunRank0(Config(stage, precision, 0));
      const TrainResult recomputed = RunRank0(Config(stage, precision, 3));
      REQUIRE(kept.losses.size() == 8);
      REQUIRE(recomputed.losses.size() == kept.losses.size());
      CHECK(std::memcmp(kept.losses.data(), recomputed.losses.data(), kept.losses.size() * sizeof(double)) == 0);
      CHECK(std::memcmp(&kept.val_loss, &recomputed.val_loss, sizeof(double)) == 0);
      CHECK(kept.losses.back() < kept.losses.front());  // it trains: the comparison is of moving numbers
    }
  }
}

}  // namespace
}  // namespace dslaunch::runtime
