// meta.json of a checkpoint (docs/checkpoint.md): everything needed to verify the shard files and
// to resume, at the same or another world size and ZeRO stage. Pure data and its JSON form;
// nlohmann_json stays in the .cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/core/param_layout.h"
#include "runtime/engine/loss_scaler.h"

namespace dslaunch::runtime {

inline constexpr int kCheckpointFormatVersion = 1;
inline constexpr char kCheckpointFormatName[] = "dslaunch-checkpoint";

struct CheckpointParameter {
  std::string name;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // in the flat buffer (elements)
  uint64_t numel = 0;
};

// The parameters of `layout` as meta.json records them, in layout order.
std::vector<CheckpointParameter> CheckpointParametersOf(const ParameterLayout& layout);

// One rank's shard file: the slice [begin, end) of every state tensor.
struct CheckpointPartition {
  int rank = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
  std::string file;  // relative to the checkpoint directory
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
};

struct CheckpointMeta {
  int version = kCheckpointFormatVersion;
  int64_t step = 0;            // training steps done (skipped fp16 steps included)
  int64_t applied_steps = 0;   // optimizer updates applied (the LR schedule's position)
  int64_t optimizer_step = 0;  // the optimizer's own step count (Adam's t)
  int world_size = 0;
  int zero_stage = 0;
  std::string precision;       // storage type of the run: "fp32", "fp16", "bf16"
  std::string model;           // "gpt", "mlp"
  std::string optimizer;       // "adam", "adamw", "sgd"
  uint64_t numel = 0;
  int64_t global_batch = 0;    // samples per step; the data position is step x global_batch
  uint64_t seed = 0;           // the sample order and initialisation are pure functions of it
  std::vector<std::string> state_tensors;  // "master", "exp_avg", ...: F32 in every shard
  std::vector<CheckpointParameter> parameters;
  std::vector<CheckpointPartition> partitions;  // one per rank of the saving run, rank order
  LossScaler::State loss_scaler;
  std::string config_sha256;   // of the train.json text the run started from (hex)
};

std::string CheckpointMetaToJson(const CheckpointMeta& meta);
// Parses and checks meta.json (`path` names it in errors, with the JSON path of what is wrong):
// the format and version, types, partitions that cover [0, numel) in rank order.
Result<CheckpointMeta> CheckpointMetaFromJson(const std::string& text, const std::string& path);

}  // namespace dslaunch::runtime
