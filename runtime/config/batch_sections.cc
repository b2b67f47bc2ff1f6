// The batch keys of train.json (docs/train-json.md, "Batch size"): DeepSpeed's rule at the world
// size, DeepSpeed's `elasticity` section, and what a restart at another world size does.
#include <algorithm>
#include <limits>

#include "runtime/config/sections.h"

namespace dslaunch::runtime {
namespace {

using internal::kNoMax;
using internal::Section;

// Bounds of the batch sizes: far beyond any real run (DeepSpeed configs use hundreds), and small
// enough that the runtime's int-sized loop counters and buffer products cannot overflow.
constexpr int64_t kMaxMicroBatch = 1 << 20;
constexpr int64_t kMaxAccumulation = 1 << 20;
// Entries of elasticity.micro_batch_sizes: DeepSpeed configs list a handful; the algorithm's cost
// grows with their number.
constexpr size_t kMaxElasticMicroBatchSizes = 64;

// a x b, or nullopt when the product does not fit in int64 (the inputs are the user's).
std::optional<int64_t> CheckedProduct(int64_t a, int64_t b) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

std::optional<int64_t> CheckedProduct(int64_t a, int64_t b, int64_t c) {
  std::optional<int64_t> ab = CheckedProduct(a, b);
  return ab ? CheckedProduct(*ab, c) : std::nullopt;
}

std::string ProductText(std::optional<int64_t> product) {
  return product ? std::to_string(*product) : std::string("(beyond 64-bit integers)");
}

std::string BatchProduct(int64_t micro, int64_t accumulation, int world) {
  return "micro " + std::to_string(micro) + " x accumulation " + std::to_string(accumulation) + " x world " +
         std::to_string(world) + " = " + ProductText(CheckedProduct(micro, accumulation, world));
}

// The world sizes at which DeepSpeed's rule accepts the given keys (only a given train_batch_size
// can fail to fit a world size): all three fix it; batch and one of the others need it to divide
// their quotient; batch alone needs it to divide the batch.
std::vector<int64_t> WorldSizesFitting(int64_t batch, std::optional<int64_t> micro, std::optional<int64_t> accumulation) {
  const std::optional<int64_t> unit = CheckedProduct(micro.value_or(1), accumulation.value_or(1));
  if (!unit || batch % *unit != 0) return {};
  if (micro && accumulation) return {batch / *unit};
  return Divisors(batch / *unit, kMaxListedWorldSize);
}

std::string FitsText(const std::vector<int64_t>& sizes) {
  if (sizes.empty()) return "no world size fits these keys";
  return (sizes.size() == 1 ? "it fits world size " : "it fits world sizes ") + ListWorldSizes(sizes);
}

Status ParseElasticity(Section& root, ElasticityConfig* out) {
  *out = ElasticityConfig{};
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> e, root.Child("elasticity"));
  if (!e) return Status::Ok();
  e->Bool("enabled", &out->enabled);
  if (out->enabled) {
    // DeepSpeed requires both when elasticity is enabled.
    for (const char* key : {"max_train_batch_size", "micro_batch_sizes"}) {
      if (!e->Has(key)) return e->Error(key, "required when elasticity is enabled");
    }
  }
  e->Int("max_train_batch_size", 1, kMaxElasticBatch, &out->max_train_batch_size);
  e->IntArray("micro_batch_sizes", 1, kMaxMicroBatch, &out->micro_batch_sizes);
  if (e->Has("micro_batch_sizes") && out->micro_batch_sizes.empty()) {
    return e->Error("micro_batch_sizes", "needs at least one micro-batch size");
  }
  if (out->micro_batch_sizes.size() > kMaxElasticMicroBatchSizes) {
    return e->Error("micro_batch_sizes", std::to_string(out->micro_batch_sizes.size()) + " entries; at most " +
                                             std::to_string(kMaxElasticMicroBatchSizes));
  }
  e->Int("min_gpus", 1, kNoMax, &out->min_gpus);
  e->Int("max_gpus", 1, kNoMax, &out->max_gpus);
  if (out->max_gpus < out->min_gpus) {
    return e->Error("max_gpus", std::to_string(out->max_gpus) + " < min_gpus " + std::to_string(out->min_gpus));
  }
  e->Bool("prefer_larger_batch", &out->prefer_larger_batch);
  e->Bool("ignore_non_elastic_batch_info", &out->ignore_non_elastic_batch_info);
  e->Double("version", 0.0, std::numeric_limits<double>::max(), &out->version);
  e->Int("min_time", 0, kNoMax, &out->min_time);
  // Version 0.2's model parallelism, and keys of DeepSpeed's scheduler integration.
  e->Unimplemented();
  e->Finish();
  return Status::Ok();
}

// The batch from an enabled elasticity section (DeepSpeed's runtime does the same).
Status ElasticBatchFor(Section& root, int world_size, std::initializer_list<std::pair<const char*, bool>> given,
                       TrainConfig* config) {
  const ElasticityConfig& elastic = config->elasticity;
  for (const auto& [key, present] : given) {
    if (!present) continue;
    if (!elastic.ignore_non_elastic_batch_info) {
      return root.Error(key, "elasticity chooses the batch: remove train_batch_size, train_micro_batch_size_per_gpu "
                             "and gradient_accumulation_steps, or set elasticity.ignore_non_elastic_batch_info to "
                             "true to have them ignored (as DeepSpeed)");
    }
    root.Warn(key, "ignored: elasticity chooses the batch (elasticity.ignore_non_elastic_batch_info is true)");
  }
  Result<ElasticBatch> batch = ComputeElasticBatch(elastic);
  if (!batch.ok()) return root.Error("elasticity", batch.status().message());
  Result<BatchSplit> split = SplitElasticBatch(elastic, *batch, world_size);
  if (!split.ok()) return root.Error("elasticity", split.status().message());
  if (split->accumulation > kMaxAccumulation) {
    return root.Error("elasticity", "gives " + std::to_string(split->accumulation) +
                                        " accumulation steps at world size " + std::to_string(world_size) +
                                        ", more than " + std::to_string(kMaxAccumulation));
  }
  config->batch = {batch->train_batch_size, split->micro_batch, split->accumulation};
  config->elastic_batch = *std::move(batch);
  return Status::Ok();
}

}  // namespace

Result<BatchConfig> ResolveBatchSizes(std::optional<int64_t> train_batch_size,
                                      std::optional<int64_t> micro_batch_per_gpu,
                                      std::optional<int64_t> gradient_accumulation_steps, int world_size) {
  if (world_size < 1) return InvalidArgumentError("world size " + std::to_string(world_size) + " < 1");
  if (!train_batch_size && !micro_batch_per_gpu) {
    return InvalidArgumentError("set train_batch_size or train_micro_batch_size_per_gpu (or both)");
  }
  const int64_t world = world_size;
  BatchConfig b;
  if (train_batch_size && micro_batch_per_gpu && gradient_accumulation_steps) {
    b = {*train_batch_size, *micro_batch_per_gpu, *gradient_accumulation_steps};
  } else if (train_batch_size && micro_batch_per_gpu) {
    const std::optional<int64_t> per_step = CheckedProduct(*micro_batch_per_gpu, world);
    if (!per_step || *train_batch_size % *per_step != 0) {
      return InvalidArgumentError("train_batch_size " + std::to_string(*train_batch_size) +
                                  " is not a multiple of micro " + std::to_string(*micro_batch_per_gpu) +
                                  " x world " + std::to_string(world) + " = " + ProductText(per_step));
    }
    b = {*train_batch_size, *micro_batch_per_gpu, *train_batch_size / *per_step};
  } else if (train_batch_size) {
    int64_t accumulation = gradient_accumulation_steps.value_or(1);
    const std::optional<int64_t> per_micro = CheckedProduct(accumulation, world);
    if (!per_micro || *train_batch_size % *per_micro != 0) {
      return InvalidArgumentError("train_batch_size " + std::to_string(*train_batch_size) +
                                  " is not a multiple of accumulation " + std::to_string(accumulation) +
                                  " x world " + std::to_string(world) + " = " + ProductText(per_micro));
    }
    b = {*train_batch_size, *train_batch_size / *per_micro, accumulation};
  } else {
    int64_t accumulation = gradient_accumulation_steps.value_or(1);
    const std::optional<int64_t> batch = CheckedProduct(*micro_batch_per_gpu, accumulation, world);
    if (!batch) return InvalidArgumentError(BatchProduct(*micro_batch_per_gpu, accumulation, world_size));
    b = {*batch, *micro_batch_per_gpu, accumulation};
  }
  if (b.train_batch_size != CheckedProduct(b.micro_batch_per_gpu, b.gradient_accumulation_steps, world)) {
    return InvalidArgumentError("train_batch_size " + std::to_string(b.train_batch_size) + " != " +
                                BatchProduct(b.micro_batch_per_gpu, b.gradient_accumulation_steps, world_size));
  }
  return b;
}

namespace internal {

Status ParseBatch(Section& root, int world_size, int generation, TrainConfig* config) {
  const size_t errors_before = root.ErrorCount();
  std::optional<int64_t> batch, micro, accumulation;
  root.OptionalInt("train_batch_size", 1, kNoMax, &batch);
  root.OptionalInt("train_micro_batch_size_per_gpu", 1, kMaxMicroBatch, &micro);
  root.OptionalInt("gradient_accumulation_steps", 1, kMaxAccumulation, &accumulation);
  DSLAUNCH_RETURN_IF_ERROR(ParseElasticity(root, &config->elasticity));
  // The batch rule needs every batch key valid; a wrong one is already reported.
  if (root.ErrorCount() != errors_before) return Status::Ok();
  if (config->elasticity.enabled) {
    return ElasticBatchFor(root, world_size,
                           {{"train_batch_size", batch.has_value()},
                            {"train_micro_batch_size_per_gpu", micro.has_value()},
                            {"gradient_accumulation_steps", accumulation.has_value()}},
                           config);
  }
  Result<BatchConfig> sizes = ResolveBatchSizes(batch, micro, accumulation, world_size);
  if (!sizes.ok() && batch && generation > 0) {
    // A restart at another world size keeps the global batch (the checkpoint's data position and
    // the run's optimisation depend on it); the configured micro-batch bounds the new one.
    const int64_t cap = micro.value_or(std::max<int64_t>(1, *batch / world_size / accumulation.value_or(1)));
    if (std::optional<BatchSplit> split = SplitForRestart(*batch, cap, world_size)) {
      config->batch = {*batch, split->micro_batch, split->accumulation};
      config->batch_note = "re-derived at restart; as configured: " + std::string(sizes.status().message());
    } else {
      return root.Error("train_batch_size", "world size " + std::to_string(world_size) + " cannot keep train_batch_size " +
                                                std::to_string(*batch) + " at a restart: it can run at world sizes " +
                                                ListWorldSizes(Divisors(*batch, kMaxListedWorldSize)));
    }
  } else if (!sizes.ok()) {
    std::string message(sizes.status().message());
    if (batch) message += "; " + FitsText(WorldSizesFitting(*batch, micro, accumulation));
    return root.Error("train_batch_size", message);
  } else {
    config->batch = *sizes;
  }
  // Inferred sizes obey the bounds of given ones.
  if (config->batch.micro_batch_per_gpu > kMaxMicroBatch) {
    return root.Error("train_batch_size", "gives a micro batch of " + std::to_string(config->batch.micro_batch_per_gpu) +
                                              " per rank, more than " + std::to_string(kMaxMicroBatch) +
                                              ": set train_micro_batch_size_per_gpu");
  }
  if (config->batch.gradient_accumulation_steps > kMaxAccumulation) {
    return root.Error("train_batch_size", "gives " + std::to_string(config->batch.gradient_accumulation_steps) +
                                              " accumulation steps, more than " + std::to_string(kMaxAccumulation));
  }
  return Status::Ok();
}

}  // namespace internal

std::string BatchSummary(const TrainConfig& config, int world_size) {
  const BatchConfig& b = config.batch;
  const std::string split = "micro-batch " + std::to_string(b.micro_batch_per_gpu) + " x accumulation " +
                            std::to_string(b.gradient_accumulation_steps);
  if (config.elastic_batch) {
    return "batch: elasticity chose train_batch_size " + std::to_string(b.train_batch_size) +
           ", valid at world sizes " + ListWorldSizes(config.elastic_batch->valid_world_sizes) + "; at world size " +
           std::to_string(world_size) + ": " + split;
  }
  return "batch: train_batch_size " + std::to_string(b.train_batch_size) + " = " + split + " x world size " +
         std::to_string(world_size) + (config.batch_note.empty() ? "" : " (" + config.batch_note + ")");
}

}  // namespace dslaunch::runtime
