#include "runtime/train/offload_sizing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace dslaunch::runtime {
namespace {

constexpr BufferKey kAllKeys[] = {BufferKey::kSubGroupSize,         BufferKey::kReduceBucketSize,
                                  BufferKey::kPrefetchBucketSize,   BufferKey::kOptimizerBufferCount,
                                  BufferKey::kParamBufferCount,     BufferKey::kParamBufferSize,
                                  BufferKey::kParamMaxInCpu};

bool IsCount(BufferKey key) { return key == BufferKey::kOptimizerBufferCount || key == BufferKey::kParamBufferCount; }

int64_t Get(const EngineOptions& e, BufferKey key) {
  switch (key) {
    case BufferKey::kSubGroupSize: return e.zero.sub_group_size;
    case BufferKey::kReduceBucketSize: return e.zero.reduce_bucket_size;
    case BufferKey::kPrefetchBucketSize: return e.zero.stage3_prefetch_bucket_size;
    case BufferKey::kOptimizerBufferCount: return e.offload_optimizer.buffer_count;
    case BufferKey::kParamBufferCount: return e.offload_param.buffer_count;
    case BufferKey::kParamBufferSize: return static_cast<int64_t>(e.offload_param.buffer_size);
    case BufferKey::kParamMaxInCpu: return static_cast<int64_t>(e.offload_param.max_in_cpu);
  }
  return 0;
}

void Set(EngineOptions* e, BufferKey key, int64_t value) {
  switch (key) {
    case BufferKey::kSubGroupSize: e->zero.sub_group_size = value; return;
    case BufferKey::kReduceBucketSize: e->zero.reduce_bucket_size = value; return;
    case BufferKey::kPrefetchBucketSize: e->zero.stage3_prefetch_bucket_size = value; return;
    case BufferKey::kOptimizerBufferCount: e->offload_optimizer.buffer_count = static_cast<int>(value); return;
    case BufferKey::kParamBufferCount: e->offload_param.buffer_count = static_cast<int>(value); return;
    case BufferKey::kParamBufferSize: e->offload_param.buffer_size = static_cast<uint64_t>(value); return;
    case BufferKey::kParamMaxInCpu: e->offload_param.max_in_cpu = static_cast<uint64_t>(value); return;
  }
}

// DeepSpeed's default of each key (the structs' own defaults).
int64_t Default(BufferKey key) {
  EngineOptions defaults;
  return Get(defaults, key);
}

// The smallest value a sized key takes.
int64_t Floor(BufferKey key) {
  if (key == BufferKey::kOptimizerBufferCount) return kMinSizedOptimizerBuffers;
  if (key == BufferKey::kParamBufferCount) return kMinSizedParamBuffers;
  if (key == BufferKey::kParamMaxInCpu) return 0;
  return kMinSizedElements;
}

// The smallest value an explicit key may be lowered to in the advice (the parser's minimum).
int64_t LowestValid(BufferKey key) {
  return key == BufferKey::kParamMaxInCpu || key == BufferKey::kPrefetchBucketSize ? 0 : 1;
}

// x rounded down to two significant digits: 4712345 -> 4700000.
int64_t RoundDown2(int64_t x) {
  if (x < 100) return x;
  int64_t scale = 1;
  while (x / scale >= 100) scale *= 10;
  return x / scale * scale;
}

double Need(const TrainConfig& config, int world, const ProcessFootprint& process) {
  return EstimateTrainingMemory(config, world, process).total();
}

double LargestGroup(const TrainConfig& config) {
  double largest = 1;
  for (double g : ParameterGroupSizes(config)) largest = std::max(largest, g);
  return largest;
}

}  // namespace

bool BufferKeyMatters(const TrainConfig& config, BufferKey key) {
  const EngineOptions& e = config.engine;
  const bool state_on_disk = e.offload_optimizer.device == swap::OffloadDevice::kNvme;
  const bool params_on_disk = e.zero.stage == 3 && e.offload_param.device == swap::OffloadDevice::kNvme;
  switch (key) {
    case BufferKey::kSubGroupSize:
    case BufferKey::kOptimizerBufferCount: return state_on_disk;
    case BufferKey::kReduceBucketSize: return true;  // the reduction's chunk at every stage
    case BufferKey::kPrefetchBucketSize: return e.zero.stage == 3;
    case BufferKey::kParamBufferCount:
    case BufferKey::kParamBufferSize:
    case BufferKey::kParamMaxInCpu: return params_on_disk;
  }
  return false;
}

bool IsSized(const TrainConfig& config, KeySource source) {
  if (source == KeySource::kAuto) return true;
  if (source == KeySource::kExplicit) return false;
  const EngineOptions& e = config.engine;
  return e.offload_optimizer.device == swap::OffloadDevice::kNvme ||
         (e.zero.stage == 3 && e.offload_param.device == swap::OffloadDevice::kNvme);
}

Result<SizedBuffers> SizeOffloadBuffers(TrainConfig* config, int world_size, const ProcessFootprint& process,
                                        double budget_per_rank, std::string_view budget_source,
                                        std::string_view file) {
  SizedBuffers out;
  out.budget = budget_per_rank;
  std::vector<BufferKey> sized;
  for (BufferKey key : kAllKeys) {
    const KeySource source = config->buffer_keys[key];
    if (!IsSized(*config, source)) continue;
    // "auto" on a key the run does not read takes DeepSpeed's default (the parser left it there).
    if (BufferKeyMatters(*config, key)) sized.push_back(key);
  }
  // The parameter buffer_size bounds the largest on-disk partition; the buffers hold one record each
  // whatever it is, so the sized value is the bound that never refuses: the largest group.
  auto size_keys_to = [&](int64_t elements, bool counts_at_floor) {
    for (BufferKey key : sized) {
      if (key == BufferKey::kParamBufferSize) {
        Set(&config->engine, key, static_cast<int64_t>(LargestGroup(*config)));
      } else if (IsCount(key)) {
        Set(&config->engine, key, counts_at_floor ? std::min(Default(key), Floor(key)) : Default(key));
      } else {
        Set(&config->engine, key, std::min(Default(key), std::max(Floor(key), elements)));
      }
    }
  };
  if (!sized.empty()) {
    size_keys_to(std::numeric_limits<int64_t>::max(), false);
    if (Need(*config, world_size, process) > budget_per_rank) {
      out.shrunk = true;
      // The largest x in [kMinSizedElements, the largest default] that fits; the estimate grows
      // with each size, so bisection finds it.
      int64_t lo = kMinSizedElements, hi = 0;
      for (BufferKey key : sized) hi = std::max(hi, Default(key));
      size_keys_to(lo, true);
      if (Need(*config, world_size, process) <= budget_per_rank) {
        while (lo < hi) {
          const int64_t mid = lo + (hi - lo + 1) / 2;
          size_keys_to(mid, true);
          if (Need(*config, world_size, process) <= budget_per_rank) {
            lo = mid;
          } else {
            hi = mid - 1;
          }
        }
        lo = std::max<int64_t>(kMinSizedElements, RoundDown2(lo));
      }
      size_keys_to(lo, true);
    }
  }
  // Reported when something was sized or the run offloads: a plain run keeps its numbers silently.
  const bool offloads = IsSized(*config, KeySource::kDefault);
  for (BufferKey key : kAllKeys) {
    if ((!sized.empty() || offloads) && BufferKeyMatters(*config, key)) {
      out.keys.push_back({key, Get(config->engine, key), config->buffer_keys[key]});
    }
  }

  // An explicit value that cannot fit: the largest value of that key alone that would.
  const double need = Need(*config, world_size, process);
  if (need <= budget_per_rank) return out;
  std::string advice;
  for (BufferKey key : kAllKeys) {
    if (config->buffer_keys[key] != KeySource::kExplicit || !BufferKeyMatters(*config, key)) continue;
    if (key == BufferKey::kParamBufferSize) continue;  // a bound: no memory of its own
    TrainConfig trial = *config;
    const int64_t given = Get(config->engine, key);
    int64_t lo = LowestValid(key), hi = given - 1;
    Set(&trial.engine, key, lo);
    if (hi < lo || Need(trial, world_size, process) > budget_per_rank) continue;  // this key alone cannot
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      Set(&trial.engine, key, mid);
      if (Need(trial, world_size, process) <= budget_per_rank) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    const int64_t fits = IsCount(key) ? lo : std::max(LowestValid(key), RoundDown2(lo));
    advice += (advice.empty() ? "" : "; ") + std::string(BufferKeyPath(key)) + ": " + std::to_string(given) +
              " cannot fit, set it to at most " + std::to_string(fits);
  }
  if (advice.empty()) return out;
  return FailedPreconditionError(std::string(file) + ": " + advice + " (or to \"auto\" to have it sized): the run " +
                                 "needs about " + FormatBytesHuman(need) + " per rank, " +
                                 FormatBytesHuman(budget_per_rank) + " available per rank (" +
                                 std::string(budget_source) + ")");
}

std::string SizedBuffersLine(const SizedBuffers& sized) {
  if (sized.keys.empty()) return "";
  std::string line = "offload buffers for " + FormatBytesHuman(sized.budget) + " per rank";
  line += sized.shrunk ? " (DeepSpeed's defaults do not fit):" : ":";
  bool first = true;
  for (const BufferChoice& c : sized.keys) {
    const char* how = c.source == KeySource::kExplicit ? "set"
                      : c.source == KeySource::kAuto   ? "auto"
                                                       : "left out";
    line += std::string(first ? " " : ", ") + std::string(BufferKeyPath(c.key)) + " " + std::to_string(c.value) +
            " (" + how + ")";
    first = false;
  }
  return line;
}

}  // namespace dslaunch::runtime
