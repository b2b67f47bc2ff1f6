// Test support: the meta.json of a small checkpoint as a save writes it, for the meta.json tests
// (meta_test.cc: exact fields; meta_fuzz_test.cc: the valid input it damages), without a grid
// and with one.
#pragma once

#include "runtime/checkpoint/meta.h"

namespace dslaunch::runtime {

// A run of 2 ranks over 10 parameters that has done 12 steps, 2 of them skipped by fp16.
inline CheckpointMeta SampleCheckpointMeta() {
  CheckpointMeta m;
  m.step = 12;
  m.applied_steps = 10;
  m.optimizer_step = 10;
  m.world_size = 2;
  m.zero_stage = 1;
  m.precision = "fp16";
  m.model = "gpt";
  m.optimizer = "adamw";
  m.numel = 10;
  m.global_batch = 8;
  m.seed = 5;
  m.state_tensors = {"master", "exp_avg", "exp_avg_sq"};
  m.parameters = {{"wte", {3, 2}, 0, 6}, {"ln_f.weight", {4}, 6, 4}};
  m.partitions = {{0, 0, 5, "rank00000.safetensors", 300, 0x0000beefu},
                  {1, 5, 10, "rank00001.safetensors", 301, 0xdeadbeefu}};
  m.loss_scaler = {1024.0, 12, 9, 2};
  m.config_sha256 = "ab12";
  return m;
}

// The same run's state saved by 4 ranks of a grid of 2 stages x 1 data copy x 2 tensor ranks
// (meta.json version 2): each rank's pieces of the whole model, together every element once
// (ranks 0 and 1 two runs of 2 each, 5 apart: elements 0-1 and 5-6, 2-3 and 7-8).
inline CheckpointMeta SampleGridCheckpointMeta() {
  CheckpointMeta m = SampleCheckpointMeta();
  m.world_size = 4;
  m.grid = {2, 2};
  m.partitions = {{0, 0, 0, "rank00000.safetensors", 200, 0x01u, {{0, 5, 2, 2}}},
                  {1, 0, 0, "rank00001.safetensors", 201, 0x02u, {{2, 5, 2, 2}}},
                  {2, 0, 0, "rank00002.safetensors", 202, 0x03u, {{4, 0, 1, 1}}},
                  {3, 0, 0, "rank00003.safetensors", 203, 0x04u, {{9, 0, 1, 1}}}};
  return m;
}

}  // namespace dslaunch::runtime
