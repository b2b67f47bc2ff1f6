// The engine's own option types: the ZeRO stage and its bucket sizes, the storage precision, and
// the options an Engine is created with. The train.json parser fills them (TrainConfig::engine,
// runtime/config/train_config.h; each field below names its key); the engine never reads
// train.json's types, and a new engine setting is declared here once.
//
// ZeroPartitioning turns the stage into the three questions the engine's parts ask (docs/engine.md,
// "The engine's three parts"): the stage is compared with a number here, and in Engine::Create's
// check of its range, and nowhere else in the engine.
#pragma once

#include <cstdint>
#include <string_view>

#include "runtime/engine/loss_scaler.h"
#include "runtime/engine/lr_schedule.h"
#include "runtime/engine/optimizer.h"
#include "runtime/swap/offload_config.h"

namespace dslaunch::runtime {

// The storage type of parameters and activations; master weights are fp32 in every case.
enum class Precision { kFp32, kFp16, kBf16 };

// Stable lower-case name, for logs: "fp32", "fp16", "bf16".
std::string_view PrecisionName(Precision precision);

// DeepSpeed's zero_optimization section and defaults (sizes in elements).
struct ZeroConfig {
  int stage = 0;
  int64_t reduce_bucket_size = 500'000'000;
  int64_t allgather_bucket_size = 500'000'000;
  bool overlap_comm = false;  // default true at stage 3, as DeepSpeed
  bool contiguous_gradients = true;
  int64_t stage3_prefetch_bucket_size = 50'000'000;
  int64_t stage3_param_persistence_threshold = 100'000;
  int64_t stage3_max_live_parameters = 1'000'000'000;
  // Elements per sub-group of the optimizer state: the unit the offloaded step streams
  // (records of the swap file). The in-memory store visits its state whole.
  int64_t sub_group_size = 1'000'000'000;
};

// The highest ZeRO stage (DeepSpeed's 0-3).
inline constexpr int kMaxZeroStage = 3;

// Which model states a ZeRO stage partitions across the ranks; each is a superset of the one
// before it. Stage 0: none; 1: optimizer state; 2: and gradients; 3: and parameters.
struct ZeroPartitioning {
  bool optimizer_state = false;  // fp32 master weights and moments: each rank owns ShardFor's slice
  bool gradients = false;        // each rank keeps only the gradient of its slice
  bool parameters = false;       // each rank keeps only its slice of the 16-bit (or fp32) parameters
};

// Precondition: 0 <= stage <= kMaxZeroStage (Engine::Create checks it).
constexpr ZeroPartitioning PartitioningFor(int stage) {
  return {.optimizer_state = stage >= 1, .gradients = stage >= 2, .parameters = stage >= 3};
}

struct EngineOptions {
  ZeroConfig zero;  // `zero_optimization`: stage and bucket sizes (elements)
  Precision precision = Precision::kFp32;  // from fp16.enabled / bf16.enabled
  LossScalerConfig loss_scaler;  // `fp16`; used with fp16 only
  OptimizerParams optimizer;  // `optimizer`; kind is the update rule (adam_w_mode decides Adam/AdamW)
  LrSchedule schedule;        // `scheduler` (kConstant when absent); scales optimizer.lr
  double gradient_clipping = 0.0;  // `gradient_clipping`: max global gradient norm; 0: off
  // zero_optimization.offload_param: "nvme" keeps the owned parameter partitions in a swap file
  // (stage 3 only; Engine::Create refuses other stages). docs/offload.md, "Parameters on disk".
  swap::OffloadParamConfig offload_param;
  // Where the optimizer state lives: device nvme puts it in swap files (NvmeOptimizerStateStore,
  // docs/offload.md); none and cpu keep it in memory. Validated by the parser.
  swap::OffloadOptimizerConfig offload_optimizer;
  swap::AioConfig aio;  // `aio`: how the swap files are read and written
};

}  // namespace dslaunch::runtime
