// The global batch at a changing world size (docs/train-json.md, "Batch size at another world
// size"): DeepSpeed's `elasticity` algorithm (version 0.1), the rule a restart follows without it,
// and the lists of world sizes that an error names. Pure arithmetic on integers; no config parsing
// (runtime/train_config_elastic.cc reads the JSON into ElasticityConfig).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace dslaunch::runtime {

// DeepSpeed's `elasticity` section, with DeepSpeed's defaults.
struct ElasticityConfig {
  bool enabled = false;
  int64_t max_train_batch_size = 0;         // required when enabled
  std::vector<int64_t> micro_batch_sizes;   // required when enabled; each >= 1
  int64_t min_gpus = 1;
  int64_t max_gpus = 10000;
  bool prefer_larger_batch = true;
  // DeepSpeed refuses train_batch_size, train_micro_batch_size_per_gpu and
  // gradient_accumulation_steps beside an enabled elasticity section unless this is true; they
  // are then ignored.
  bool ignore_non_elastic_batch_info = false;
  double version = 0.1;
  int64_t min_time = 0;  // minutes before a scheduler may rescale: accepted, a scheduler's business
};

// The batch DeepSpeed's algorithm chooses, independent of the world size.
struct ElasticBatch {
  int64_t train_batch_size = 0;
  std::vector<int64_t> valid_world_sizes;  // ascending, within [min_gpus, max_gpus]
};

// How one step's samples split at one world size.
struct BatchSplit {
  int64_t micro_batch = 0;   // per rank and micro-step
  int64_t accumulation = 0;  // micro-steps per step
};

// The largest max_train_batch_size and least common multiple of the micro-batch sizes accepted:
// far beyond any batch trained (a few million sequences), and small enough that listing the
// divisors of a candidate takes milliseconds and no product overflows.
inline constexpr int64_t kMaxElasticBatch = int64_t{1} << 32;
// DeepSpeed's candidate multipliers: the 38 smallest highly composite numbers (enough for batches
// up to about 720K times the largest micro-batch).
inline constexpr int64_t kHighlyCompositeNumbers[] = {
    1,     2,     4,     6,     12,     24,     36,     48,     60,     120,    180,    240,    360,
    720,   840,   1260,  1680,  2520,   5040,   7560,   10080,  15120,  20160,  25200,  27720, 45360,
    50400, 55440, 83160, 110880, 166320, 221760, 277200, 332640, 498960, 554400, 665280, 720720};

// DeepSpeed's elasticity, version 0.1. Candidates: each micro-batch size and their least common
// multiple, each multiplied by the largest highly composite number that keeps it within
// max_train_batch_size (a base already past it stays as it is: DeepSpeed keeps an LCM beyond the
// maximum, and its own tests rely on it). A candidate's valid world sizes are those in
// [min_gpus, max_gpus] that divide candidate / m for some micro-batch size m dividing it. The
// candidate valid at the most world sizes wins; a tie goes to the larger (prefer_larger_batch) or
// the smaller batch. kInvalidArgument (message without a JSON path; the caller adds it) for a
// disabled config, an empty or non-positive list of micro-batch sizes, a micro-batch size above
// max_train_batch_size, min_gpus > max_gpus or < 1, a version other than 0.1, bounds past
// kMaxElasticBatch, or no world size valid for any candidate.
Result<ElasticBatch> ComputeElasticBatch(const ElasticityConfig& config);

// The split of `batch` at `world` ranks: the largest micro-batch size of `config` that divides
// train_batch_size / world, and the accumulation that fills the batch. kInvalidArgument when
// `world` is not one of batch.valid_world_sizes, naming them:
// "world size 3 cannot keep the elastic train_batch_size 8: it can run at world sizes 1, 2, 4".
Result<BatchSplit> SplitElasticBatch(const ElasticityConfig& config, const ElasticBatch& batch, int world);

// The split a restart uses when the configured sizes do not fit `world` (docs/train-json.md):
// train_batch_size stays; the micro-batch is the largest divisor of train_batch_size / world not
// above `micro_cap` (the configured micro-batch: a restart never needs more memory per micro-step);
// the accumulation fills the batch. nullopt when world does not divide train_batch_size.
std::optional<BatchSplit> SplitForRestart(int64_t train_batch_size, int64_t micro_cap, int world);

// The divisors of n (>= 1) that are at most `max_divisor`, ascending. O(min(sqrt(n), max_divisor)).
std::vector<int64_t> Divisors(int64_t n, int64_t max_divisor);

// The largest world size an error message lists: more ranks than any job runs, and it bounds the
// search for the list to a millisecond whatever the batch.
inline constexpr int64_t kMaxListedWorldSize = int64_t{1} << 20;

// "1, 2, 4" from sizes; past `limit` entries "..., and N more".
std::string ListWorldSizes(const std::vector<int64_t>& sizes, size_t limit = 24);

}  // namespace dslaunch::runtime
