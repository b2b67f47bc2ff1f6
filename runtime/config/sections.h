// Internal to the train.json parser: one function per section of the schema (docs/train-json.md).
// Each reads its keys from the root Section and fills its struct. A wrong value is reported to the
// parse's error list (Section getters) and parsing goes on; a returned kInvalidArgument (with the
// JSON path) is a problem after which the rest of that section cannot be read, and the caller
// reports it beside the others. The DeepSpeed sections live in deepspeed_sections.cc, the
// runtime's own sections in bundled_sections.cc.
#pragma once

#include <string>

#include "runtime/config/json_fields.h"
#include "runtime/config/train_config.h"

namespace dslaunch::runtime::internal {

// The batch keys and the elasticity section (batch_sections.cc): fills config->batch,
// config->elasticity, config->elastic_batch and config->batch_note for `world_size` ranks in
// `generation`.
Status ParseBatch(Section& root, int world_size, int generation, TrainConfig* config);

// DeepSpeed keys, each section parsed into its component's own type and checked by that type's
// validator (ValidateOptimizerParams, ValidateLrSchedule, ValidateLossScalerConfig), whose error
// Section::Validated turns into one naming the file and JSON path.
// Without an optimizer section, *out is DeepSpeed's {"type": "AdamW"} and *defaulted is set.
Status ParseOptimizer(Section& root, OptimizerParams* out, bool* defaulted);
Status ParseScheduler(Section& root, LrSchedule* out);
// The fp16 section into *loss_scaler; fp16.enabled and bf16.enabled into *precision.
Status ParsePrecision(Section& root, LossScalerConfig* loss_scaler, Precision* precision);
// zero_optimization; where each of its sizable buffer keys came from goes to *sources.
// *stage_known is false when zero_optimization.stage was wrong (reported; out->stage is then 0).
Status ParseZero(Section& root, ZeroConfig* out, bool* stage_known, BufferKeySources* sources);
// zero_optimization.offload_param into *out (defaults when absent), checked by
// ValidateOffloadParamConfig against `stage`; nvme_path resolved against `base_dir`; a note for
// keys accepted without effect ("cpu", pin_memory) goes to the warnings.
// buffer_count, buffer_size and max_in_cpu may be "auto" (their source goes to *sources).
Status ParseOffloadParam(Section& root, int stage, const std::string& base_dir, swap::OffloadParamConfig* out,
                         BufferKeySources* sources);
// zero_optimization.offload_optimizer and the top-level aio block (offload_sections.cc), each
// checked by its validator in runtime/swap/offload_config.h; nvme_path resolves like the data
// paths. Accepted keys with no effect here (device "cpu", pin_memory, intra_op_parallelism > 1)
// add one warning each.
// buffer_count may be "auto" (its source goes to *sources).
Status ParseOptimizerOffload(Section& root, const std::string& base_dir, swap::OffloadOptimizerConfig* offload,
                             swap::AioConfig* aio, BufferKeySources* sources);
// activation_checkpointing (docs/train-json.md): when the block is present, sets *recompute_blocks
// (the gpt model's, for `n_layer` blocks) to number_checkpoints capped at n_layer, or n_layer when
// absent; nullptr for a model without blocks (mlp). Keys with no effect on a CPU rank are
// accepted when true with a warning line each.
Status ParseActivationCheckpointing(Section& root, int n_layer, int* recompute_blocks);
// The pipeline section (docs/parallelism.md): stages (an integer >= 1; "auto" is refused as every
// "auto" the Hugging Face Trainer fills in), partition_method and schedule; DeepSpeed's engine keys
// that change nothing here are recognised (unimplemented_keys.cc). Whether the stages fit the job
// and the model is CheckPipeline's question.
Status ParsePipeline(Section& root, PipelineConfig* out);
// A pipelined run's limits, once every section is read: the stages divide `world_size` and the
// model's blocks (a gpt model), ZeRO 0-1, and no checkpoint.dir yet (docs/parallelism.md).
Status CheckPipeline(const Section& root, const TrainConfig& config, int world_size);
// The tensor_parallel section (docs/parallelism.md, "Tensor parallelism"): autotp_size (0, DeepSpeed's
// "off", is 1); DeepSpeed's AutoTP keys that change nothing here are recognised
// (unimplemented_keys.cc).
Status ParseTensorParallel(Section& root, TensorParallelConfig* out);
// A tensor-parallel run's limits, once every section is read: a gpt model whose heads the ranks
// share, stages x tensor ranks dividing `world_size`, and no checkpoint.dir yet.
Status CheckTensorParallel(const Section& root, const TrainConfig& config, int world_size);
// Top-level DeepSpeed keys that are recognised and ignored.
void CollectUnimplementedTopLevel(Section& root);

// Runtime sections; the model into GptConfig or MlpConfig, checked by ValidateGptConfig or
// ValidateMlpConfig. `base_dir` is the directory relative paths resolve against ("" = as given).
// `init_from` receives model.init_from, resolved ("" when absent).
Status ParseModel(Section& root, const std::string& base_dir, ModelConfig* out, std::string* init_from);
// `model` is null when the model section had errors: the checks against the model are skipped.
Status ParseData(Section& root, const ModelConfig* model, const std::string& base_dir, DataConfig* out);
Status ParseTrainLoop(Section& root, const ModelConfig* model, TrainLoopConfig* out);
// At generation > 0 a checkpoint `dir` sets resume_newest.
Status ParseCheckpoint(Section& root, const std::string& base_dir, int generation, CheckpointConfig* out);

// `path` joined to `base_dir` unless it is absolute or base_dir is empty.
std::string ResolvePath(const std::string& base_dir, const std::string& path);

}  // namespace dslaunch::runtime::internal
