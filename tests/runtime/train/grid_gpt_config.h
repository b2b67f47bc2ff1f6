// Test support: the GPT the pipeline and tensor-parallel trainer tests split (4 blocks and 4
// heads, so that 2 and 4 stages or tensor ranks exist; 16 wide, 8 tokens, vocabulary 32), with a
// global batch of 16 sequences in micro-batches of 2 over `data` data-parallel copies, AdamW with
// weight decay, 6 steps.
#pragma once

#include "runtime/config/train_config.h"

namespace dslaunch::runtime {

inline TrainConfig GridGptConfig(int stages, int tensor, int data, int zero_stage) {
  TrainConfig c;
  c.batch.micro_batch_per_gpu = 2;
  c.batch.gradient_accumulation_steps = 16 / (2 * data);
  c.batch.train_batch_size = 16;
  c.engine.zero.stage = zero_stage;
  c.engine.optimizer.lr = 3e-3;
  c.engine.optimizer.weight_decay = 0.01;
  c.model = GptConfig{4, 4, 16, 8, 32};
  c.data.seq_len = 8;
  c.train.steps = 6;
  c.train.eval_steps = 2;
  c.steps_per_print = 3;
  c.seed = 5;
  c.pipeline.stages = stages;
  c.tensor_parallel.size = tensor;
  return c;
}

}  // namespace dslaunch::runtime
