// Test support: the tiny GPT the checkpoint tests train (2 layers, 2 heads, 16 wide, 8 tokens,
// vocabulary 32), with a global batch of 8 samples at any world size of 1, 2 or 4, AdamW with
// weight decay and clipping, and zero buckets small enough to take several per step.
#pragma once

#include <cstdint>

#include "runtime/config/train_config.h"

namespace dslaunch::runtime {

inline TrainConfig TinyGptConfig(int world, int stage, int64_t steps) {
  TrainConfig c;
  c.batch.train_batch_size = 8;
  c.batch.micro_batch_per_gpu = 2;
  c.batch.gradient_accumulation_steps = 8 / (2 * world);
  c.engine.optimizer.kind = OptimizerKind::kAdamW;
  c.engine.optimizer.lr = 3e-3;
  c.engine.optimizer.weight_decay = 0.01;
  c.engine.gradient_clipping = 1.0;
  c.model = GptConfig{2, 2, 16, 8, 32};
  c.data.seq_len = 8;
  c.train.steps = steps;
  c.train.eval_steps = 1;
  c.steps_per_print = 100;
  c.seed = 5;
  c.engine.zero.stage = stage;
  c.engine.zero.reduce_bucket_size = 4000;
  c.engine.zero.stage3_param_persistence_threshold = 100;
  c.source_sha256 = "test";
  return c;
}

}  // namespace dslaunch::runtime
