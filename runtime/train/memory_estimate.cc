#include "runtime/train/memory_estimate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <variant>
#include <vector>

#include "runtime/engine/parameter_swap.h"
#include "runtime/models/gpt.h"
#include "runtime/models/mlp.h"

namespace dslaunch::runtime {
namespace {

constexpr double kFloat = sizeof(float);

// fp32 optimizer buffers per owned parameter besides the master weights (OptimizerState::For).
double MomentsPerParameter(const OptimizerParams& optimizer) {
  if (optimizer.kind != OptimizerKind::kSgd) return 2.0;  // Adam, AdamW: exp_avg, exp_avg_sq
  return optimizer.momentum != 0.0 ? 1.0 : 0.0;
}

struct ModelShape {
  std::vector<double> groups;  // elements per parameter group
  double activations = 0;      // bytes
};

ModelShape ShapeOf(const TrainConfig& config) {
  const int micro = static_cast<int>(std::min<int64_t>(config.batch.micro_batch_per_gpu, 1 << 30));
  if (const auto* gpt = std::get_if<GptConfig>(&config.model)) {
    return {GptModel::GroupSizes(*gpt), GptModel::ActivationBytes(*gpt, micro)};
  }
  const auto& mlp = std::get<MlpConfig>(config.model);
  return {MlpModel::GroupSizes(mlp.widths), MlpModel::ActivationBytes(mlp.widths, micro)};
}

// Parameters on disk at stage 3 (docs/offload.md, "Parameters on disk"): rank 0 holds the
// persistent groups whole and the owned parts PlanParameterSwap keeps resident; with fp32 storage
// the master weights are the optimizer-state store's own copy; the swap's buffers are certain.
// Beyond 2^53 elements the shape is no model that could be planned: the in-memory figures stand.
void EstimateParameterOffload(const TrainConfig& config, const ModelShape& shape, double numel, int world,
                              double storage, MemoryEstimate* m) {
  const EngineOptions& engine = config.engine;
  constexpr double kExactDoubles = 9007199254740992.0;  // 2^53: sizes as doubles are exact below
  if (numel >= kExactDoubles) return;
  std::vector<size_t> sizes;
  double persistent = 0;
  for (double g : shape.groups) {
    sizes.push_back(static_cast<size_t>(g));
    if (g <= static_cast<double>(engine.zero.stage3_param_persistence_threshold)) persistent += g;
  }
  const ShardMap shards(static_cast<size_t>(numel), world, 0, true);
  const ParameterSwapPlan plan = PlanParameterSwap(sizes, shards, engine.zero.stage3_param_persistence_threshold,
                                                   engine.offload_param.max_in_cpu);
  m->parameters = (persistent + static_cast<double>(plan.resident_elements)) * storage;
  const double shard = static_cast<double>(shards.own().size());
  if (storage == kFloat) m->optimizer_state += shard * kFloat;
  if (plan.record_count > 0) {
    const double record = static_cast<double>(
        swap::AlignUp(plan.record_elements * static_cast<uint64_t>(storage), swap::kDefaultDirectIoAlignment));
    m->buffers += engine.offload_param.buffer_count * record;
  }
}

}  // namespace

MemoryEstimate EstimateTrainingMemory(const TrainConfig& config, int world_size) {
  const EngineOptions& engine = config.engine;
  const ModelShape shape = ShapeOf(config);
  double numel = 0, largest_group = 0;
  for (double g : shape.groups) {
    numel += g;
    largest_group = std::max(largest_group, g);
  }
  const int stage = engine.zero.stage;
  const double world = std::max(world_size, 1);
  const double shard = stage >= 1 ? std::ceil(numel / world) : numel;  // rank 0's, the largest
  const bool fp32 = engine.precision == Precision::kFp32;
  const double storage = fp32 ? 4.0 : 2.0;
  const double moments = MomentsPerParameter(engine.optimizer);
  const bool state_on_disk = engine.offload_optimizer.device == swap::OffloadDevice::kNvme;

  MemoryEstimate m;
  // The engine's allocations (runtime/engine/zero_engine.cc, ZeroEngine's constructor and memory()).
  m.parameters = (stage == 3 ? shard : numel) * storage;
  if (stage == 3) {
    for (double g : shape.groups) {
      if (g <= static_cast<double>(engine.zero.stage3_param_persistence_threshold)) m.parameters += g * storage;
    }
  }
  m.gradients = (stage >= 2 ? shard : numel) * storage;
  m.optimizer_state = moments * shard * kFloat + (fp32 ? 0.0 : shard * kFloat);
  if (state_on_disk) {
    // On disk (docs/offload.md): memory holds the ring, buffer_count records of master and moments
    // (each record rounded up to the disk's direct-I/O alignment, a few KiB at most, not counted).
    const double record = std::min(shard, static_cast<double>(engine.zero.sub_group_size)) * (1.0 + moments) * kFloat;
    m.optimizer_state = engine.offload_optimizer.buffer_count * record;
  }
  m.activations = shape.activations;

  // Transient buffers. At start-up the engine's parts read the model's initial values a range at
  // a time (at most a group's part at once), unless model.init_from imports the whole fp32 model
  // first. During training: the step's fp32 gradient (runtime/engine/step_gradient.h: a reduced
  // copy at stages 0-1 except fp32 at stage 0, which is reduced in place; at stages 2-3 none with
  // fp32, and with 16-bit storage one sub-group's range converted at a time: the whole slice in
  // memory, a sub_group_size record with the state on disk), the reduce bucket (stages 2-3), one
  // acquired fp32 group and its micro-step gradient. The larger of the two phases counts.
  const double startup = config.model_init_from.empty() ? largest_group * kFloat : numel * kFloat;
  double training = 0;
  if (stage == 0 && !fp32) training += numel * kFloat;
  if (stage == 1) training += shard * kFloat;
  if (stage >= 2 && !fp32) {
    training += (state_on_disk ? std::min(shard, static_cast<double>(engine.zero.sub_group_size)) : shard) * kFloat;
  }
  if (stage >= 2) {
    const double bucket = std::min(numel, static_cast<double>(std::max<int64_t>(1, engine.zero.reduce_bucket_size)));
    training += std::max(largest_group, bucket) * kFloat;
  }
  if (!fp32 || stage == 3) training += largest_group * kFloat;  // an acquired group
  if (!fp32 || stage >= 2) training += largest_group * kFloat;  // its micro-step gradient
  m.buffers = std::max(startup, training);
  if (stage == 3 && engine.offload_param.device == swap::OffloadDevice::kNvme) {
    EstimateParameterOffload(config, shape, numel, world_size < 1 ? 1 : world_size, storage, &m);
  }
  if (config.checkpoint.async && !config.checkpoint.dir.empty()) {
    m.buffers += (1.0 + moments) * std::ceil(numel / world) * kFloat;  // the host copy of the state slice
  }
  return m;
}

std::string FormatBytesHuman(double bytes) {
  char buf[48];
  if (bytes >= 1024.0 * 1024 * 1024) {
    std::snprintf(buf, sizeof(buf), "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
  } else if (bytes >= 1024.0 * 1024) {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / (1024.0 * 1024));
  } else if (bytes >= 1024.0) {
    std::snprintf(buf, sizeof(buf), "%.1f KiB", bytes / 1024.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f B", bytes);
  }
  return buf;
}

Status CheckMemoryFits(const MemoryEstimate& need, int ranks_on_node, const AvailableMemory& available,
                       std::string_view file) {
  const int ranks = std::max(ranks_on_node, 1);
  const double total = need.total() * ranks;
  if (std::isfinite(total) && total <= available.bytes) return Status::Ok();
  std::string text = std::string(file) + ": model needs about " + FormatBytesHuman(need.total()) +
                     " per rank (parameters " + FormatBytesHuman(need.parameters) + ", gradients " +
                     FormatBytesHuman(need.gradients) + ", optimizer state " + FormatBytesHuman(need.optimizer_state) +
                     ", activations " + FormatBytesHuman(need.activations) + ", buffers " +
                     FormatBytesHuman(need.buffers) + ")";
  if (ranks > 1) text += " x " + std::to_string(ranks) + " ranks on this node = " + FormatBytesHuman(total);
  text += "; this machine has " + FormatBytesHuman(available.bytes) + " available (" + available.source + "). ";
  text += need.activations >= need.total() / 2
              ? "Lower train_micro_batch_size_per_gpu, model.block_size or the model's size"
              : "Use a higher zero_optimization.stage, more nodes, fp16/bf16, or a smaller model";
  return FailedPreconditionError(text);
}

}  // namespace dslaunch::runtime
