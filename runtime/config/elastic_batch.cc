#include "runtime/config/elastic_batch.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <set>

namespace dslaunch::runtime {
namespace {

// The only version of DeepSpeed's algorithm implemented (0.2 adds model parallelism).
constexpr double kElasticityVersion = 0.1;

// A candidate's world sizes: those in [min, max] dividing candidate / m for a micro-batch size m
// that divides the candidate (DeepSpeed's get_valid_gpus).
std::vector<int64_t> ValidWorldSizes(int64_t candidate, const std::vector<int64_t>& micro_batches,
                                     int64_t min_gpus, int64_t max_gpus) {
  std::set<int64_t> valid;
  for (int64_t micro : micro_batches) {
    if (candidate % micro != 0) continue;
    for (int64_t d : Divisors(candidate / micro, max_gpus)) {
      if (d >= min_gpus) valid.insert(d);
    }
  }
  return {valid.begin(), valid.end()};
}

// base x the largest highly composite number keeping it within max; base itself when even x1 is
// past max (DeepSpeed's get_candidate_batch_sizes).
int64_t ScaleCandidate(int64_t base, int64_t max) {
  int64_t best = base;
  for (int64_t hcn : kHighlyCompositeNumbers) {
    int64_t scaled = 0;
    if (__builtin_mul_overflow(base, hcn, &scaled) || scaled > max) break;
    best = scaled;
  }
  return best;
}

}  // namespace

std::vector<int64_t> Divisors(int64_t n, int64_t max_divisor) {
  std::vector<int64_t> low, high;
  for (int64_t d = 1; d <= max_divisor && d <= n / d; ++d) {
    if (n % d != 0) continue;
    low.push_back(d);
    const int64_t pair = n / d;
    if (pair != d && pair <= max_divisor) high.push_back(pair);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

std::string ListWorldSizes(const std::vector<int64_t>& sizes, size_t limit) {
  std::string out;
  for (size_t i = 0; i < sizes.size() && i < limit; ++i) out += (i == 0 ? "" : ", ") + std::to_string(sizes[i]);
  if (sizes.size() > limit) out += ", ... and " + std::to_string(sizes.size() - limit) + " more";
  return out;
}

Result<ElasticBatch> ComputeElasticBatch(const ElasticityConfig& config) {
  if (!config.enabled) return InvalidArgumentError("elasticity is not enabled");
  if (config.version != kElasticityVersion) {
    char version[32];
    std::snprintf(version, sizeof(version), "%g", config.version);
    return InvalidArgumentError(std::string("version ") + version +
                                " is not implemented; this runtime implements DeepSpeed's elasticity version 0.1");
  }
  if (config.micro_batch_sizes.empty()) return InvalidArgumentError("micro_batch_sizes is empty");
  if (config.max_train_batch_size < 1 || config.max_train_batch_size > kMaxElasticBatch) {
    return InvalidArgumentError("max_train_batch_size " + std::to_string(config.max_train_batch_size) +
                                " is outside [1, " + std::to_string(kMaxElasticBatch) + "]");
  }
  if (config.min_gpus < 1 || config.max_gpus < config.min_gpus) {
    return InvalidArgumentError("min_gpus " + std::to_string(config.min_gpus) + " and max_gpus " +
                                std::to_string(config.max_gpus) + " must satisfy 1 <= min_gpus <= max_gpus");
  }
  int64_t lcm = 1;
  for (int64_t micro : config.micro_batch_sizes) {
    if (micro < 1 || micro > config.max_train_batch_size) {
      return InvalidArgumentError("micro-batch size " + std::to_string(micro) + " is outside [1, max_train_batch_size " +
                                  std::to_string(config.max_train_batch_size) + "]");
    }
    lcm = std::lcm(lcm, micro);  // both <= kMaxElasticBatch: the product fits before the check
    if (lcm > kMaxElasticBatch) {
      return InvalidArgumentError("the least common multiple of micro_batch_sizes exceeds " +
                                  std::to_string(kMaxElasticBatch));
    }
  }
  std::vector<int64_t> bases = config.micro_batch_sizes;
  bases.push_back(lcm);
  std::set<int64_t> candidates;
  for (int64_t base : bases) candidates.insert(ScaleCandidate(base, config.max_train_batch_size));

  // The candidate valid at the most world sizes; among equals the larger (or smaller) batch. The
  // result does not depend on the order of the candidates.
  std::optional<ElasticBatch> best;
  for (int64_t candidate : candidates) {
    std::vector<int64_t> valid = ValidWorldSizes(candidate, config.micro_batch_sizes, config.min_gpus, config.max_gpus);
    const bool better =
        !best || valid.size() > best->valid_world_sizes.size() ||
        (valid.size() == best->valid_world_sizes.size() &&
         (config.prefer_larger_batch ? candidate > best->train_batch_size : candidate < best->train_batch_size));
    if (better) best = ElasticBatch{candidate, std::move(valid)};
  }
  if (best->valid_world_sizes.empty()) {
    return InvalidArgumentError("no world size in [min_gpus " + std::to_string(config.min_gpus) + ", max_gpus " +
                                std::to_string(config.max_gpus) + "] can run any candidate batch (" +
                                ListWorldSizes({candidates.begin(), candidates.end()}) +
                                ") with these micro-batch sizes");
  }
  return *best;
}

Result<BatchSplit> SplitElasticBatch(const ElasticityConfig& config, const ElasticBatch& batch, int world) {
  const auto& valid = batch.valid_world_sizes;
  if (!std::binary_search(valid.begin(), valid.end(), static_cast<int64_t>(world))) {
    return InvalidArgumentError("world size " + std::to_string(world) + " cannot keep the elastic train_batch_size " +
                                std::to_string(batch.train_batch_size) + ": it can run at world sizes " +
                                ListWorldSizes(valid));
  }
  const int64_t per_rank = batch.train_batch_size / world;
  int64_t micro = 0;
  for (int64_t m : config.micro_batch_sizes) {
    if (per_rank % m == 0) micro = std::max(micro, m);
  }
  // A valid world size divides batch / m for some m dividing the batch, so some m divides per_rank.
  if (micro == 0) return InternalError("no micro-batch size divides " + std::to_string(per_rank));
  return BatchSplit{micro, per_rank / micro};
}

std::optional<BatchSplit> SplitForRestart(int64_t train_batch_size, int64_t micro_cap, int world) {
  if (world < 1 || train_batch_size % world != 0) return std::nullopt;
  const int64_t per_rank = train_batch_size / world;
  const std::vector<int64_t> fitting = Divisors(per_rank, std::max<int64_t>(1, micro_cap));
  const int64_t micro = fitting.back();  // 1 divides everything
  return BatchSplit{micro, per_rank / micro};
}

}  // namespace dslaunch::runtime
