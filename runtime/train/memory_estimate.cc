#include "runtime/train/memory_estimate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <variant>
#include <vector>

#include "runtime/engine/parameter_swap.h"
#include "runtime/models/gpt.h"
#include "runtime/models/mlp.h"
#include "runtime/train/pipeline_stage.h"

namespace dslaunch::runtime {
namespace {

constexpr double kFloat = sizeof(float);

// fp32 optimizer buffers per owned parameter besides the master weights (OptimizerState::For).
double MomentsPerParameter(const OptimizerParams& optimizer) {
  if (optimizer.kind != OptimizerKind::kSgd) return 2.0;  // Adam, AdamW: exp_avg, exp_avg_sq
  return optimizer.momentum != 0.0 ? 1.0 : 0.0;
}

struct ModelShape {
  std::vector<double> groups;   // elements per parameter group
  double activations = 0;       // bytes
  double gradients_held = 0;    // elements of the groups whose micro-step gradients are out at once
};

// A pipelined or tensor-parallel gpt (docs/parallelism.md): of every stage, the most it holds, on
// tensor rank 0 (the most rows of the vocabulary). The groups of the stage with the most
// parameters; the activations of the stage that allocates the most (PipelineStage::ActivationBytes).
ModelShape PipelineShapeOf(const TrainConfig& config, const GptConfig& gpt, int micro) {
  const int stages = config.pipeline.stages;
  auto partition = PartitionStages(gpt, stages, config.pipeline.partition_method);
  ModelShape shape;
  if (!partition.ok()) return shape;  // refused by the config's checks before this is asked
  const PipelineStageOptions options{
      gpt, *partition, config.pipeline.schedule, micro, config.data.seq_len > 0 ? config.data.seq_len : gpt.block_size,
      static_cast<int>(std::min<int64_t>(config.batch.gradient_accumulation_steps, 1 << 30)),
      config.tensor_parallel.size};
  double most_parameters = -1;
  for (int s = 0; s < stages; ++s) {
    const GptPart part{(*partition)[s].begin, (*partition)[s].end, 0, config.tensor_parallel.size};
    const std::vector<double> groups = GptModel::GroupSizes(gpt, part);
    double parameters = 0, largest = 0;
    for (double g : groups) parameters += g;
    for (size_t g = (s == 0 ? 1 : 0); g < groups.size(); ++g) largest = std::max(largest, groups[g]);
    shape.activations = std::max(shape.activations, PipelineStage::ActivationBytes(options, stages, s));
    shape.gradients_held = std::max(shape.gradients_held, (s == 0 ? groups.front() : 0.0) + largest);
    if (parameters > most_parameters) {
      most_parameters = parameters;
      shape.groups = groups;
    }
  }
  return shape;
}

ModelShape ShapeOf(const TrainConfig& config) {
  const int micro = static_cast<int>(std::min<int64_t>(config.batch.micro_batch_per_gpu, 1 << 30));
  ModelShape shape;
  if (const auto* gpt = std::get_if<GptConfig>(&config.model); gpt != nullptr && RanksPerModelCopy(config) > 1) {
    return PipelineShapeOf(config, *gpt, micro);
  }
  if (const auto* gpt = std::get_if<GptConfig>(&config.model)) {
    shape = {GptModel::GroupSizes(*gpt), GptModel::ActivationBytes(*gpt, micro)};
    // The backward (runtime/models/gpt.cc) takes the embeddings' gradient (group 0, tied with the
    // head) first and hands it back last: it is out beside each block's.
    double others = 0;
    for (size_t g = 1; g < shape.groups.size(); ++g) others = std::max(others, shape.groups[g]);
    shape.gradients_held = shape.groups.front() + others;
    return shape;
  }
  const auto& mlp = std::get<MlpConfig>(config.model);
  shape = {MlpModel::GroupSizes(mlp.widths), MlpModel::ActivationBytes(mlp.widths, micro)};
  // One layer's gradient at a time (runtime/models/mlp.cc).
  for (double g : shape.groups) shape.gradients_held = std::max(shape.gradients_held, g);
  return shape;
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
  const ParameterSwapPlan none_kept = PlanParameterSwap(sizes, shards, engine.zero.stage3_param_persistence_threshold, 0);
  m->parameters = (persistent + static_cast<double>(plan.resident_elements)) * storage;
  m->keyed += static_cast<double>(plan.resident_elements - none_kept.resident_elements) * storage;  // max_in_cpu's
  const double shard = static_cast<double>(shards.own().size());
  if (storage == kFloat) m->optimizer_state += shard * kFloat;
  if (plan.record_count > 0) {
    const double record = static_cast<double>(
        swap::AlignUp(plan.record_elements * static_cast<uint64_t>(storage), swap::kDefaultDirectIoAlignment));
    m->buffers += engine.offload_param.buffer_count * record;
    m->keyed += engine.offload_param.buffer_count * record;
  }
}

// The stage-3 acquisition (runtime/engine/parameter_store.cc, Gather): a run of groups gathered at
// once, up to stage3_prefetch_bucket_size elements (at least the group asked for), converted to
// fp32 live copies, through a staging buffer in the storage type (fp32: a transient one, given
// back after the conversion) and, with parameters on disk, the owned part read into a staging
// buffer of its own. Returns the bytes; *keyed gets the part the prefetch bucket adds.
double Stage3Acquisition(const EngineOptions& engine, double largest_group, double numel, double world,
                         double storage, bool params_on_disk, double* keyed) {
  const double bucket = std::min(static_cast<double>(std::max<int64_t>(0, engine.zero.stage3_prefetch_bucket_size)),
                                 static_cast<double>(std::max<int64_t>(0, engine.zero.stage3_max_live_parameters)));
  const double run = std::min(numel, std::max(largest_group, bucket));
  const double per_element = kFloat + storage + (params_on_disk ? storage / world : 0.0);
  *keyed += (run - largest_group) * per_element;
  return run * per_element;
}

// The collectives' own buffers with more than one rank, for a reduction chunk of `chunk` elements
// (runtime/comm/gloo/communicator.cc): at stage 0 Gloo's ring all-reduce allocates a temporary
// (counted as the chunk's bytes, an upper bound); at stages 1-3 the reduce-scatter keeps two ring
// buffers of a rank's block, and stage 1 with 16-bit storage converts each chunk to fp32 first.
double CommunicationBytes(int stage, bool fp32, double chunk, double world) {
  if (stage == 0) return chunk * kFloat;
  return 2 * std::ceil(chunk / world) * kFloat + (stage == 1 && !fp32 ? chunk * kFloat : 0.0);
}

}  // namespace

std::vector<double> ParameterGroupSizes(const TrainConfig& config) { return ShapeOf(config).groups; }

MemoryEstimate EstimateTrainingMemory(const TrainConfig& config, int world_size, const ProcessFootprint& process) {
  const EngineOptions& engine = config.engine;
  const ModelShape shape = ShapeOf(config);
  double numel = 0, largest_group = 0;
  for (double g : shape.groups) {
    numel += g;
    largest_group = std::max(largest_group, g);
  }
  const int stage = engine.zero.stage;
  // ZeRO partitions over the data-parallel copies: world / (stages x tensor ranks) of them.
  world_size = std::max(world_size / std::max(RanksPerModelCopy(config), 1), 1);
  const double world = world_size;
  const double shard = stage >= 1 ? std::ceil(numel / world) : numel;  // rank 0's, the largest
  const bool fp32 = engine.precision == Precision::kFp32;
  const double storage = fp32 ? 4.0 : 2.0;
  const double moments = MomentsPerParameter(engine.optimizer);
  const bool state_on_disk = engine.offload_optimizer.device == swap::OffloadDevice::kNvme;
  const bool params_on_disk = stage == 3 && engine.offload_param.device == swap::OffloadDevice::kNvme;
  const double sub_group = std::min(shard, static_cast<double>(std::max<int64_t>(1, engine.zero.sub_group_size)));

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
    // On disk (docs/offload.md): memory holds the ring, buffer_count records of master and moments,
    // each rounded up to the disk's direct-I/O alignment.
    const double record = static_cast<double>(swap::AlignUp(
        static_cast<uint64_t>(std::min(sub_group, 1e18) * (1.0 + moments) * kFloat), swap::kDefaultDirectIoAlignment));
    m.optimizer_state = engine.offload_optimizer.buffer_count * record;
    m.keyed += m.optimizer_state;
  }
  m.activations = shape.activations;

  // Transient buffers. At start-up the engine's parts read the model's initial values a range at
  // a time (at most a group's part at once), unless model.init_from imports the whole fp32 model
  // first. During training: the step's fp32 gradient (runtime/engine/step_gradient.h: a reduced
  // copy at stages 0-1 except fp32 at stage 0, which is reduced in place; at stages 2-3 none with
  // fp32, and with 16-bit storage one sub-group's range converted at a time: the whole slice in
  // memory, a sub_group_size record with the state on disk), the reduce bucket (stages 2-3), the
  // acquired fp32 groups (with 16-bit storage or stage 3; at stage 3 the prefetch run) and their
  // micro-step gradients. The larger of the two phases counts.
  const double startup = config.model_init_from.empty() ? largest_group * kFloat : numel * kFloat;
  double training = 0;
  if (stage == 0 && !fp32) training += numel * kFloat;
  if (stage == 1) training += shard * kFloat;
  if (stage >= 2 && !fp32) {
    training += (state_on_disk ? sub_group : shard) * kFloat;
    if (state_on_disk) m.keyed += sub_group * kFloat;
  }
  // The gradient reduction's chunk (runtime/engine/gradient_reducer.cc: the bucket's capacity).
  const double bucket = std::min(numel, static_cast<double>(std::max<int64_t>(1, engine.zero.reduce_bucket_size)));
  const double chunk = std::max(largest_group, bucket);
  if (stage >= 2) {
    training += chunk * kFloat;
    m.keyed += (chunk - largest_group) * kFloat;
  }
  if (world_size > 1) {
    const double communication = CommunicationBytes(stage, fp32, chunk, world);
    training += communication;
    m.keyed += communication - CommunicationBytes(stage, fp32, largest_group, world);
    // overlap_comm: a second bucket with its reduced part (stages 2-3), or a second 16-bit staging
    // chunk (stage 1), filled while the first is reduced (docs/engine.md "Overlapped reduction").
    const double second = stage >= 2 ? chunk + std::min(chunk, shard) : (stage == 1 && !fp32 ? chunk : 0.0);
    if (engine.zero.overlap_comm && second > 0) {
      training += second * kFloat;
      m.keyed += (second - (stage >= 2 ? largest_group + std::min(largest_group, shard) : largest_group)) * kFloat;
    }
  }
  if (stage == 3) {
    training += Stage3Acquisition(engine, largest_group, numel, world, storage, params_on_disk, &m.keyed);
  } else if (!fp32) {
    training += largest_group * kFloat;  // an acquired group
  }
  if (!fp32 || stage >= 2) training += shape.gradients_held * kFloat;  // the micro-step gradients out at once
  m.buffers = std::max(startup, training);
  if (params_on_disk) EstimateParameterOffload(config, shape, numel, world_size < 1 ? 1 : world_size, storage, &m);
  if (config.checkpoint.async && !config.checkpoint.dir.empty()) {
    m.buffers += (1.0 + moments) * std::ceil(numel / world) * kFloat;  // the host copy of the state slice
  }
  m.process = kProcessBaselineBytes + std::max(process.compute_threads, 1) * kPerComputeThreadBytes +
              process.data_bytes + process.largest_data_file;
  // Each slot: the rank's slice of every fp32 state tensor (master weights and moments).
  m.snapshots = process.snapshot_slots * ((1.0 + moments) * std::ceil(numel / world) * kFloat + kSnapshotMetaBytes);
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
                     FormatBytesHuman(need.buffers) + ", process " + FormatBytesHuman(need.process) +
                     (need.snapshots > 0 ? ", in-memory snapshots " + FormatBytesHuman(need.snapshots) : "") + ")";
  if (ranks > 1) text += " x " + std::to_string(ranks) + " ranks on this node = " + FormatBytesHuman(total);
  text += "; this machine has " + FormatBytesHuman(available.bytes) + " available (" + available.source + "). ";
  if (need.activations >= need.total() / 2) {
    text += "Lower train_micro_batch_size_per_gpu, model.block_size or the model's size";
  } else if (need.keyed >= need.total() / 2) {
    // The offload buffers are most of it (DeepSpeed's defaults make them the model's size).
    text += FormatBytesHuman(need.keyed) + " of it is buffers the offload keys set: lower zero_optimization." +
            "sub_group_size, reduce_bucket_size, stage3_prefetch_bucket_size, offload_optimizer.buffer_count, " +
            "offload_param.buffer_count or offload_param.max_in_cpu, or leave them out (or \"auto\") to have " +
            "them sized to fit";
  } else {
    text += "Use a higher zero_optimization.stage, more nodes, fp16/bf16, or a smaller model";
  }
  return FailedPreconditionError(text);
}

}  // namespace dslaunch::runtime
