// The DeepSpeed sections of train.json: optimizer, scheduler, fp16/bf16, zero_optimization,
// activation_checkpointing, and the DeepSpeed keys that are recognised but not implemented. Names
// and defaults follow DeepSpeed's configuration reference; docs/train-json.md lists them.
#include <limits>

#include "runtime/config/sections.h"

namespace dslaunch::runtime::internal {
namespace {

constexpr double kAnyPositive = std::numeric_limits<double>::max();

// Adam and AdamW: `type` is the name train.json gives; out->kind becomes the update rule.
Status ParseAdamParams(Section& params, OptimizerKind type, OptimizerParams* out) {
  params.Double("lr", 0.0, kAnyPositive, &out->lr);
  std::vector<double> betas;
  // Each in [0, 1), PyTorch's rule (torch.optim.Adam: "Invalid beta parameter at index 1: 1.0"): a
  // beta of 1 never forgets the first gradient, and beta2 = 1 with bias correction divides by 0.
  params.DoubleArray("betas", 2, 0.0, 1.0, &betas, /*max_exclusive=*/true,
                     " (PyTorch's Adam refuses it too); the usual values are [0.9, 0.999]");
  if (!betas.empty()) {
    out->beta1 = betas[0];
    out->beta2 = betas[1];
  }
  params.Double("eps", 0.0, kAnyPositive, &out->eps);
  params.Double("weight_decay", 0.0, kAnyPositive, &out->weight_decay);
  params.Bool("bias_correction", &out->bias_correction);
  // DeepSpeed's Adam decouples weight decay (AdamW) unless "adam_w_mode": false.
  bool adam_w_mode = true;
  params.Bool("adam_w_mode", &adam_w_mode);
  if (type == OptimizerKind::kAdamW && !adam_w_mode) {
    params.Report(params.Error("adam_w_mode", "false contradicts type AdamW (use type Adam for L2 weight decay)"));
  }
  out->kind = adam_w_mode ? OptimizerKind::kAdamW : OptimizerKind::kAdam;
  params.Unimplemented();
  params.Finish();
  return Status::Ok();
}

Status ParseSgdParams(Section& params, OptimizerParams* out) {
  params.Double("lr", 0.0, kAnyPositive, &out->lr);
  params.Double("momentum", 0.0, kAnyPositive, &out->momentum);
  params.Double("dampening", 0.0, kAnyPositive, &out->dampening);
  params.Double("weight_decay", 0.0, kAnyPositive, &out->weight_decay);
  params.Bool("nesterov", &out->nesterov);
  params.Unimplemented();
  params.Finish();
  return Status::Ok();
}

}  // namespace

Status ParseOptimizer(Section& root, OptimizerParams* out, bool* defaulted) {
  *out = OptimizerParams{};
  *defaulted = false;
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> section, root.Child("optimizer"));
  if (!section) {
    // Megatron's and Hugging Face's configs leave the optimizer to the client code; this runtime
    // is the client, so it trains with what {"type": "AdamW"} gives in DeepSpeed (FusedAdam's
    // defaults, decoupled weight decay), and says so at start-up (DefaultOptimizerNote).
    out->kind = OptimizerKind::kAdamW;
    *defaulted = true;
    return Status::Ok();
  }
  const size_t errors_before = root.ErrorCount();
  if (!section->Has("type")) return section->Error("type", "required: one of Adam, AdamW, SGD");
  size_t index = 0;
  // DeepSpeed matches optimizer names case-insensitively. Without a type the params cannot be
  // read (their keys depend on it): they are left unchecked.
  if (!section->Choice("type", {"Adam", "AdamW", "SGD"}, /*ignore_case=*/true, &index)) {
    section->Known("params");
    section->Finish();
    return Status::Ok();
  }
  static constexpr OptimizerKind kTypes[] = {OptimizerKind::kAdam, OptimizerKind::kAdamW, OptimizerKind::kSgd};
  const OptimizerKind type = kTypes[index];
  // Without params, Adam and AdamW both decouple weight decay (adam_w_mode defaults to true).
  out->kind = type == OptimizerKind::kSgd ? OptimizerKind::kSgd : OptimizerKind::kAdamW;
  section->Unimplemented();
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> params, section->Child("params"));
  section->Finish();
  if (params) {
    DSLAUNCH_RETURN_IF_ERROR(type == OptimizerKind::kSgd ? ParseSgdParams(*params, out)
                                                         : ParseAdamParams(*params, type, out));
  }
  if (root.ErrorCount() != errors_before) return Status::Ok();  // the rules between keys need valid keys
  return root.Validated(ValidateOptimizerParams(*out));
}

Status ParseScheduler(Section& root, LrSchedule* out) {
  *out = LrSchedule{};
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> section, root.Child("scheduler"));
  if (!section) return root.Validated(ValidateLrSchedule(*out));
  const size_t errors_before = root.ErrorCount();
  if (!section->Has("type")) {
    return section->Error("type", "required: one of WarmupLR, WarmupDecayLR, WarmupCosineLR");
  }
  size_t index = 0;
  if (!section->Choice("type", {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR"}, /*ignore_case=*/false, &index)) {
    section->Known("params");  // their keys depend on the type
    section->Finish();
    return Status::Ok();
  }
  static constexpr LrScheduleKind kTypes[] = {LrScheduleKind::kWarmupLr, LrScheduleKind::kWarmupDecayLr,
                                             LrScheduleKind::kWarmupCosineLr};
  out->kind = kTypes[index];
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> params, section->Child("params"));
  section->Finish();
  bool needs_total = out->kind != LrScheduleKind::kWarmupLr;
  if (!params) {
    if (needs_total) return section->Error("params", "required: total_num_steps has no default");
    return root.Validated(ValidateLrSchedule(*out));
  }
  Section& p = *params;
  // 0 is accepted, as DeepSpeed does: the schedule warms up over max(2, warmup_num_steps) steps.
  p.Int("warmup_num_steps", 0, kNoMax, &out->warmup_num_steps);
  size_t warmup_type = 0;
  p.Choice("warmup_type", {"log", "linear"}, /*ignore_case=*/false, &warmup_type);
  out->warmup_type = warmup_type == 0 ? WarmupType::kLog : WarmupType::kLinear;
  if (out->kind == LrScheduleKind::kWarmupCosineLr) {
    p.Double("warmup_min_ratio", 0.0, 1.0, &out->warmup_min_ratio);
    p.Double("cos_min_ratio", 0.0, 1.0, &out->cos_min_ratio);
  } else {
    p.Double("warmup_min_lr", 0.0, kAnyPositive, &out->warmup_min_lr);
    p.Double("warmup_max_lr", 0.0, kAnyPositive, &out->warmup_max_lr);
  }
  p.Unimplemented();
  if (needs_total) {
    if (!p.Has("total_num_steps")) {
      p.Report(p.Error("total_num_steps", "required for this scheduler type"));
      p.Known("total_num_steps");
    }
    p.Int("total_num_steps", 1, kNoMax, &out->total_num_steps);
  }
  p.Finish();
  if (root.ErrorCount() != errors_before) return Status::Ok();  // the rules between keys need valid keys
  return root.Validated(ValidateLrSchedule(*out));
}

Status ParsePrecision(Section& root, LossScalerConfig* loss_scaler, Precision* precision) {
  *loss_scaler = LossScalerConfig{};
  bool fp16 = false, bf16 = false;
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> f, root.Child("fp16"));
  const size_t errors_before = root.ErrorCount();
  if (f) {
    f->Bool("enabled", &fp16);
    f->Double("loss_scale", 0.0, kAnyPositive, &loss_scaler->loss_scale);
    f->Int("initial_scale_power", 0, kMaxInitialScalePower, &loss_scaler->initial_scale_power);
    f->Int("loss_scale_window", 1, kNoMax, &loss_scaler->loss_scale_window);
    f->Int("hysteresis", 1, kNoMax, &loss_scaler->hysteresis);
    f->Double("min_loss_scale", 0.0, kAnyPositive, &loss_scaler->min_loss_scale);
    f->Unimplemented();
    f->Finish();
    if (root.ErrorCount() == errors_before) root.Report(root.Validated(ValidateLossScalerConfig(*loss_scaler)));
  }
  // DeepSpeed accepts "bfloat16" as another name for the bf16 section.
  for (const char* key : {"bf16", "bfloat16"}) {
    DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> b, root.Child(key));
    if (!b) continue;
    b->Bool("enabled", &bf16);
    b->Unimplemented("$.bf16");
    b->Finish();
    if (bf16 && fp16) {
      return b->Error("enabled", "fp16.enabled is true too; enable at most one of fp16 and bf16");
    }
  }
  *precision = fp16 ? Precision::kFp16 : bf16 ? Precision::kBf16 : Precision::kFp32;
  return Status::Ok();
}

Status ParseZero(Section& root, ZeroConfig* out, bool* stage_known, BufferKeySources* sources) {
  *out = ZeroConfig{};
  *stage_known = true;
  if (root.HoldsBool("zero_optimization")) {
    // DeepSpeed's old form: true is stage 1, false stage 0, with the all-gather bucket in the
    // top-level "allgather_size" (its read_zero_config_deprecated); accepted with its warning.
    bool enabled = false;
    root.Bool("zero_optimization", &enabled);
    out->stage = enabled ? 1 : 0;
    root.Known("allgather_size");  // DeepSpeed ignores it with false
    if (enabled) root.Int("allgather_size", 1, kNoMax, &out->allgather_bucket_size);
    root.Warn("zero_optimization", std::string("the boolean form is deprecated (DeepSpeed reads ") +
                                       (enabled ? "true as stage 1" : "false as stage 0") + "); write {\"stage\": " +
                                       (enabled ? "1" : "0") + "}");
    return Status::Ok();
  }
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> z, root.Child("zero_optimization"));
  if (!z) return Status::Ok();
  *stage_known = z->Int("stage", 0, 3, &out->stage);
  z->IntOrAuto("reduce_bucket_size", 1, kNoMax, &out->reduce_bucket_size, &(*sources)[BufferKey::kReduceBucketSize]);
  z->Int("allgather_bucket_size", 1, kNoMax, &out->allgather_bucket_size);
  out->overlap_comm = out->stage == 3;  // DeepSpeed's default depends on the stage
  z->Bool("overlap_comm", &out->overlap_comm);
  z->Bool("contiguous_gradients", &out->contiguous_gradients);
  z->IntOrAuto("stage3_prefetch_bucket_size", 0, kNoMax, &out->stage3_prefetch_bucket_size,
               &(*sources)[BufferKey::kPrefetchBucketSize]);
  z->Int("stage3_param_persistence_threshold", 0, kNoMax, &out->stage3_param_persistence_threshold);
  z->Int("stage3_max_live_parameters", 0, kNoMax, &out->stage3_max_live_parameters);
  z->IntOrAuto("sub_group_size", 1, kNoMax, &out->sub_group_size, &(*sources)[BufferKey::kSubGroupSize]);
  z->Known("offload_optimizer");  // ParseOptimizerOffload (offload_sections.cc)
  z->Known("offload_param");      // ParseOffloadParam (offload_sections.cc)
  z->Unimplemented();
  z->Finish();
  return Status::Ok();
}

Status ParseActivationCheckpointing(Section& root, int n_layer, int* recompute_blocks) {
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> ac, root.Child("activation_checkpointing"));
  if (!ac) return Status::Ok();
  // DeepSpeed's keys; the booleans default to false. Each one that asks for something a CPU rank
  // already has (or cannot have) is accepted with a note, printed once by rank 0.
  struct Flag {
    const char* key;
    const char* note;
  };
  static constexpr Flag kFlags[] = {
      {"partition_activations",
       "splits checkpoints across model-parallel ranks; this runtime has no model parallelism (each rank holds its "
       "own micro-batch's activations whole): no effect"},
      {"cpu_checkpointing",
       "moves checkpoints from GPU to host memory; a CPU rank's activations are in host memory already: no effect"},
      {"contiguous_memory_optimization",
       "the block inputs already live in one buffer allocated once, so they cannot fragment: no effect"},
      {"synchronize_checkpoint_boundary", "the CPU kernels are synchronous; there is no device to wait for: no effect"},
      {"profile",
       "the recomputation's time is not broken out of the step time; scripts/bench-recompute.sh measures it: no "
       "effect"},
  };
  for (const Flag& flag : kFlags) {
    bool on = false;
    ac->Bool(flag.key, &on);
    if (on) ac->Warn(flag.key, flag.note);
  }
  // number_checkpoints: how many blocks, from the first, are recomputed (DeepSpeed sizes its
  // contiguous buffer with it; Megatron passes the layer count). Absent: every block.
  int64_t blocks = n_layer;
  ac->Int("number_checkpoints", 1, kNoMax, &blocks);
  ac->Finish();
  if (recompute_blocks == nullptr) {
    root.Warn("activation_checkpointing", "the mlp model has no transformer blocks to recompute: no effect");
    return Status::Ok();
  }
  if (blocks > n_layer) {
    ac->Warn("number_checkpoints", std::to_string(blocks) + " > model.n_layer " + std::to_string(n_layer) +
                                       ": every block is recomputed");
    blocks = n_layer;
  }
  *recompute_blocks = static_cast<int>(blocks);
  return Status::Ok();
}

Status ParsePipeline(Section& root, PipelineConfig* out) {
  *out = PipelineConfig{};
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> p, root.Child("pipeline"));
  if (!p) return Status::Ok();
  p->Int("stages", 1, kMaxGptLayers, &out->stages);
  size_t method = 0;
  if (p->Choice("partition_method", {"parameters", "uniform"}, true, &method)) {
    out->partition_method = method == 1 ? PartitionMethod::kUniform : PartitionMethod::kParameters;
  }
  size_t schedule = 0;
  if (p->Choice("schedule", {"1f1b", "gpipe"}, true, &schedule)) {
    out->schedule = schedule == 1 ? PipeSchedule::kGPipe : PipeSchedule::k1F1B;
  }
  p->Unimplemented();
  p->Finish();
  return Status::Ok();
}

Status CheckPipeline(const Section& root, const TrainConfig& config, int world_size) {
  const int stages = config.pipeline.stages;
  if (stages == 1) return Status::Ok();
  const std::string count = std::to_string(stages);
  auto error = [&](const std::string& path_and_message) {
    return root.Validated(InvalidArgumentError(path_and_message));
  };
  if (world_size % stages != 0) {
    return error("pipeline.stages: " + count + " does not divide the " + std::to_string(world_size) +
                 " ranks of the job: give the job a multiple of " + count +
                 " ranks (each stage has world / stages data-parallel copies)");
  }
  const auto* gpt = std::get_if<GptConfig>(&config.model);
  if (gpt == nullptr) return error("pipeline.stages: " + count + ": only the gpt model is split into stages");
  if (stages > gpt->n_layer) {
    return error("pipeline.stages: " + count + " is more than model.n_layer " + std::to_string(gpt->n_layer) +
                 ": each stage holds at least one block");
  }
  if (config.engine.zero.stage > 1) {
    return error("zero_optimization.stage: " + std::to_string(config.engine.zero.stage) + " with pipeline.stages " +
                 count + ": a pipelined run takes ZeRO stage 0 or 1, as DeepSpeed's pipeline engine does (stages "
                 "2-3 reduce the gradients of every micro-batch)");
  }
  return Status::Ok();
}

Status ParseTensorParallel(Section& root, TensorParallelConfig* out) {
  *out = TensorParallelConfig{};
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> tp, root.Child("tensor_parallel"));
  if (!tp) return Status::Ok();
  int size = 1;
  if (tp->Int("autotp_size", 0, kMaxGptEmbedding, &size)) out->size = std::max(size, 1);
  tp->Unimplemented();
  tp->Finish();
  return Status::Ok();
}

Status CheckTensorParallel(const Section& root, const TrainConfig& config, int world_size) {
  const int size = config.tensor_parallel.size;
  if (size == 1) return Status::Ok();
  const std::string count = std::to_string(size);
  auto error = [&](Status status) { return root.Validated(std::move(status)); };
  const auto* gpt = std::get_if<GptConfig>(&config.model);
  if (gpt == nullptr) {
    return error(InvalidArgumentError("tensor_parallel.autotp_size: " + count +
                                      ": only the gpt model is split over tensor ranks"));
  }
  DSLAUNCH_RETURN_IF_ERROR(error(ValidateGptTensorSplit(*gpt, size)));
  if (world_size % RanksPerModelCopy(config) != 0) {
    const std::string per_copy = std::to_string(RanksPerModelCopy(config));
    return error(InvalidArgumentError(
        "tensor_parallel.autotp_size: pipeline.stages " + std::to_string(config.pipeline.stages) +
        " x tensor_parallel.autotp_size " + count + " = " + per_copy + " ranks per model copy does not divide the " +
        std::to_string(world_size) + " ranks of the job: give the job a multiple of " + per_copy +
        " ranks, or change the two sizes"));
  }
  return Status::Ok();
}

void CollectUnimplementedTopLevel(Section& root) {
  root.Unimplemented();
}

}  // namespace dslaunch::runtime::internal
