// meta.json of a checkpoint (docs/checkpoint.md): everything needed to verify the shard files and
// to resume, at the same or another world size and ZeRO stage. Pure data and its JSON form;
// nlohmann_json stays in the .cc.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/core/param_layout.h"
#include "runtime/core/part_placement.h"
#include "runtime/engine/loss_scaler.h"

namespace dslaunch::runtime {

// Version 1: each rank's shard is one range of the flat state, in rank order. Version 2 (a model
// split over pipeline stages or tensor ranks) adds the grid and gives each shard as strided pieces
// of the whole model's flat state. A run without a grid writes version 1; this build reads both.
inline constexpr int kCheckpointFormatVersion = 2;
inline constexpr int kCheckpointFormatVersionWithoutGrid = 1;
inline constexpr char kCheckpointFormatName[] = "dslaunch-checkpoint";
// The most runs (a strided piece counts its runs) the partitions of a checkpoint may have: a
// meta.json past it is damaged, not a model (GPT-2 XL on 5 tensor ranks has about 770,000).
inline constexpr uint64_t kMaxCheckpointRuns = uint64_t{1} << 24;

struct CheckpointParameter {
  std::string name;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // in the flat buffer (elements)
  uint64_t numel = 0;
};

// The parameters of `layout` as meta.json records them, in layout order.
std::vector<CheckpointParameter> CheckpointParametersOf(const ParameterLayout& layout);

// One rank's shard file: the slice [begin, end) of every state tensor (version 1), or its pieces
// of the whole model's (version 2, runtime/core/part_placement.h), in the file's order.
struct CheckpointPartition {
  int rank = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
  std::string file;  // relative to the checkpoint directory
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
  std::vector<WholePiece> pieces;  // version 2; then begin and end are 0

  // The elements of each state tensor in the file.
  uint64_t elements() const;
};

// The process grid of the saving run (docs/parallelism.md, "The grid"); data = world / (pipeline x
// tensor).
struct CheckpointGrid {
  int pipeline = 1;
  int tensor = 1;
  bool trivial() const { return pipeline == 1 && tensor == 1; }
  int data(int world_size) const { return world_size / (pipeline * tensor); }
};

struct CheckpointMeta {
  int version = kCheckpointFormatVersionWithoutGrid;  // as read; the writer derives it from `grid`
  int64_t step = 0;            // training steps done (skipped fp16 steps included)
  int64_t applied_steps = 0;   // optimizer updates applied (the LR schedule's position)
  int64_t optimizer_step = 0;  // the optimizer's own step count (Adam's t)
  int world_size = 0;
  CheckpointGrid grid;
  int zero_stage = 0;
  std::string precision;       // storage type of the run: "fp32", "fp16", "bf16"
  std::string model;           // "gpt", "mlp"
  std::string optimizer;       // "adam", "adamw", "sgd"
  uint64_t numel = 0;
  int64_t global_batch = 0;    // samples per step; the data position is step x global_batch
  uint64_t seed = 0;           // the sample order and initialisation are pure functions of it
  std::vector<std::string> state_tensors;  // "master", "exp_avg", ...: F32 in every shard
  std::vector<CheckpointParameter> parameters;
  // One per rank of the saving run, rank order: together they hold every element once.
  std::vector<CheckpointPartition> partitions;
  LossScaler::State loss_scaler;
  std::string config_sha256;   // of the train.json text the run started from (hex)
};

// What a shard's safetensors header records besides the format, for a save of `step` on
// `world` ranks: step, rank, world size, and its slice (begin and end; a version 2 partition its
// element count). The save writes it; the resume's check compares it with meta.json.
std::map<std::string, std::string> ShardHeaderOf(int64_t step, int world, const CheckpointPartition& part);

std::string CheckpointMetaToJson(const CheckpointMeta& meta);
// Parses and checks meta.json (`path` names it in errors, with the JSON path of what is wrong):
// the format and version, types, the grid against the world size, partitions that cover
// [0, numel) in rank order (version 1) or whose pieces hold every element once (version 2).
Result<CheckpointMeta> CheckpointMetaFromJson(const std::string& text, const std::string& path);

}  // namespace dslaunch::runtime
