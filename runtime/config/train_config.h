// TrainConfig: a parsed train.json (a DeepSpeed config plus the runtime's model, data, train and
// checkpoint sections), as typed structs with enums; no strings are looked up after parsing.
//
// The schema, every key, its type and default, the batch rule and path resolution are specified in
// docs/train-json.md. Parsing is pure: ParseTrainConfig takes the text and an injected loader for a
// referenced DeepSpeed config; ReadTrainConfig is the thin file-reading shell around it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"
#include "runtime/config/buffer_keys.h"
#include "runtime/config/checkpoint_config.h"
#include "runtime/config/elastic_batch.h"
#include "runtime/engine/engine_options.h"
#include "runtime/engine/loss_scaler.h"
#include "runtime/engine/lr_schedule.h"
#include "runtime/engine/optimizer.h"
#include "runtime/models/gpt.h"
#include "runtime/models/mlp.h"
#include "runtime/parallel/layer_partition.h"
#include "runtime/parallel/pipeline_schedule.h"

namespace dslaunch::runtime {

// train_batch_size = train_micro_batch_size_per_gpu x gradient_accumulation_steps x world_size.
struct BatchConfig {
  int64_t train_batch_size = 0;
  int64_t micro_batch_per_gpu = 0;
  int64_t gradient_accumulation_steps = 0;
};

// Applies DeepSpeed's batch rule: given any of the three (at least the global or the micro batch),
// infers the missing ones (a missing accumulation defaults to 1) and checks that
// batch == micro x accumulation x world. On failure returns kInvalidArgument whose message shows the
// arithmetic, e.g. "train_batch_size 32 != micro 4 x accumulation 2 x world 2 = 16".
Result<BatchConfig> ResolveBatchSizes(std::optional<int64_t> train_batch_size,
                                      std::optional<int64_t> micro_batch_per_gpu,
                                      std::optional<int64_t> gradient_accumulation_steps,
                                      int world_size);

// Precision, ZeroConfig (DeepSpeed's zero_optimization section) and EngineOptions, which holds
// them, are the engine's own types: runtime/engine/engine_options.h.

// The model section: the model's own config type (runtime/models), filled by the parser.
using ModelConfig = std::variant<GptConfig, MlpConfig>;

// kTokens: llm.c token shards (.bin). kIdx: MNIST/FashionMNIST IDX image files with a label file.
enum class DataFormat { kTokens, kIdx };

// Paths are resolved against the directory of the train.json (absolute paths are kept).
struct DataConfig {
  DataFormat format = DataFormat::kTokens;
  std::string train;
  std::string val;           // empty: no validation
  std::string train_labels;  // kIdx only
  std::string val_labels;    // kIdx only
  int seq_len = 0;           // tokens per sample; defaults to the gpt block_size, 0 for kIdx
};

// The `pipeline` section (docs/parallelism.md): the gpt model's blocks split into `stages`
// pipeline stages, each on its own ranks; the job's ranks are stages x data-parallel copies.
struct PipelineConfig {
  int stages = 1;
  PartitionMethod partition_method = PartitionMethod::kParameters;
  PipeSchedule schedule = PipeSchedule::k1F1B;
};

// train.json's `tensor_parallel` section (DeepSpeed's AutoTP training key; docs/parallelism.md,
// "Tensor parallelism"): the ranks each layer's matrices are split over.
struct TensorParallelConfig {
  int size = 1;  // autotp_size; DeepSpeed's 0 (off) is 1
};

struct TrainLoopConfig {
  int64_t steps = 0;          // optimizer steps; required
  int64_t eval_interval = 0;  // steps between validation passes; 0 = only at the end
  int64_t eval_steps = 20;    // micro-batches per validation pass
  int sample_tokens = 0;      // tokens generated at the end (gpt only); 0 = no sample
  std::string sample_prompt;  // prompt text for the sample (byte-level)
  // Seconds without a progress report after which the agent takes the rank for hung; 0 = off;
  // nullopt: derived from the step time (runtime/train/progress_report.h).
  std::optional<double> watchdog_timeout;
};

// The checkpoint section, CheckpointConfig, and CheckpointLoad: runtime/config/checkpoint_config.h.

// Where the bundled runtime trains: train.json's top-level "device" (docs/gpu.md, "Training on the
// device"). kAuto: on the rank's GPU where one is visible and the worker was built with CUDA, else
// on the CPU; kCuda: on the GPU, an error where there is none; kCpu: on the CPU.
enum class TrainDevice { kAuto, kCpu, kCuda };

struct TrainConfig {
  TrainDevice device = TrainDevice::kAuto;
  BatchConfig batch;
  ElasticityConfig elasticity;
  std::optional<ElasticBatch> elastic_batch;  // what elasticity chose, when enabled
  // Why `batch` differs from the configured sizes: a restart at another world size re-derived the
  // micro-batch and the accumulation (docs/train-json.md); empty when it does not.
  std::string batch_note;
  // The DeepSpeed sections the engine takes (optimizer, scheduler, gradient_clipping, fp16/bf16,
  // zero_optimization with its offload blocks, aio), parsed straight into the engine's options
  // (runtime/engine/engine_options.h, which says which key fills which field), each checked by the
  // validator next to its type. The training loop creates the engine with them as they are.
  EngineOptions engine;
  // Which offload buffer keys were given a number, "auto", or left out (runtime/config/buffer_keys.h);
  // SizeOffloadBuffers (runtime/train/offload_sizing.h) sets the sized ones in `engine`.
  BufferKeySources buffer_keys;
  int64_t steps_per_print = 10;
  uint64_t seed = 42;
  ModelConfig model;
  // model.init_from, resolved like the data paths: a safetensors file of parameters (read with
  // ImportParameters, runtime/checkpoint/model_file.h) that replaces the model's own initialisation when
  // training starts from scratch; a resumed checkpoint takes precedence. Empty: not given.
  std::string model_init_from;
  DataConfig data;
  TrainLoopConfig train;
  CheckpointConfig checkpoint;
  PipelineConfig pipeline;
  TensorParallelConfig tensor_parallel;
  // True when the config has no optimizer section (Megatron's and Hugging Face's leave it to their
  // client code): engine.optimizer is then DeepSpeed's {"type": "AdamW"} (DefaultOptimizerNote).
  bool default_optimizer = false;
  std::string deepspeed_config_path;  // resolved "deepspeed_config", empty when inline
  std::string source_sha256;          // hex SHA-256 of the files read (ReadTrainConfig; checkpoints record it)
  // DeepSpeed keys this runtime recognises but does not implement, as JSON paths
  // ("$.zero_optimization.offload_optimizer"), in the order the parser visits them.
  std::vector<std::string> unimplemented_keys;
  // Other start-up warnings, each a whole line "<file>: <JSON path>: <what>": an unknown key that
  // was ignored, a deprecated form that was accepted (e.g. "zero_optimization": true).
  std::vector<std::string> warnings;
};

// The ranks that hold one copy of the model: pipeline stages x tensor ranks (docs/parallelism.md).
inline int RanksPerModelCopy(const TrainConfig& config) {
  return config.pipeline.stages * config.tensor_parallel.size;
}

// Reads the file at a resolved path; returns its text or an error (kNotFound, ...).
using ConfigLoader = std::function<Result<std::string>(const std::string& path)>;

// The largest train.json or referenced DeepSpeed config read: real ones are a few kilobytes, and
// the parsed document takes several times the text's size in memory.
inline constexpr size_t kMaxConfigBytes = 16u << 20;

// Parses a train.json for a run of `world_size` ranks in generation `generation` (the restart
// count: at generation > 0 the batch rule keeps train_batch_size at another world size, and a
// checkpoint.dir resumes its newest checkpoint). `path` names the file in messages and is the base
// for relative paths (data, checkpoint, "deepspeed_config"); `loader` reads a referenced DeepSpeed
// config.
// Returns kInvalidArgument for a config that cannot be read at all, with one message: syntax errors
// (with line and column), text over kMaxConfigBytes, nesting deeper than 64 levels, duplicate keys
// (both places), every "auto" value at once. Otherwise every key is read and every problem
// collected: wrong types or out-of-range values, unknown keys that are likely typos of a known key
// (with the suggestion), required keys missing, batch inconsistencies (a world size that cannot
// keep the batch names the world sizes that can). One problem is returned as
// "<file>: <JSON path>: <problem>"; several as "N errors in the configuration:" followed by one
// such line each, indented, sorted by file and path. An unknown key that is no likely typo is a
// warning (TrainConfig::warnings), as DeepSpeed ignores unknown keys. A loader error is returned
// with context. Pure apart from the loader; never throws, and allocates in proportion to the text
// (no model-sized allocation: see runtime/train/memory_estimate.h for that check).
Result<TrainConfig> ParseTrainConfig(std::string_view json_text, std::string_view path, int world_size,
                                     const ConfigLoader& loader, int generation = 0);

// The key paths a parse reads, for the settings harness (tests/settings/): a test checks that each
// has a test that sets it in a file and observes its effect where it acts. Paths are JSON paths
// ("$.fp16.loss_scale_window"; no key of the schema is read inside an array).
struct ConfigKeys {
  std::set<std::string> implemented;    // every key a getter asked for, present or not
  std::set<std::string> unimplemented;  // the recognised-but-unimplemented keys looked for
};

// The keys ParseTrainConfig reads from `json_text`: a section's keys only where the section is
// present (an absent "fp16" reads "$.fp16" alone), the optimizer's and scheduler's params for the
// type given. Errors as ParseTrainConfig's.
Result<ConfigKeys> ConfigKeysRead(std::string_view json_text, std::string_view path, int world_size,
                                  const ConfigLoader& loader);

// Reads `path` and any referenced DeepSpeed config from disk, then ParseTrainConfig.
Result<TrainConfig> ReadTrainConfig(const std::string& path, int world_size, int generation = 0);

// One line for the start of a run, saying how the global batch splits at `world_size`:
// "batch: train_batch_size 8 = micro-batch 2 x accumulation 2 x world size 2", with what
// elasticity chose and its valid world sizes, or why a restart re-derived the split.
std::string BatchSummary(const TrainConfig& config, int world_size);

// One start-up warning listing config.unimplemented_keys, starting "warning: "; empty when there
// are none. The caller prefixes only its program name.
std::string UnimplementedWarning(const TrainConfig& config);

// One start-up line naming the optimizer a config without an optimizer section trains with and
// its values ("optimizer: no \"optimizer\" section; training with AdamW (lr 0.001, ..."); empty
// when the config has one.
std::string DefaultOptimizerNote(const TrainConfig& config);

// Stable lower-case names, for logs: "adamw", "warmup_cosine_lr", ... (PrecisionName is the
// engine's: runtime/engine/engine_options.h).
std::string_view OptimizerTypeName(OptimizerKind type);
std::string_view TrainDeviceName(TrainDevice device);  // "auto", "cpu", "cuda"

std::string_view SchedulerTypeName(LrScheduleKind type);

}  // namespace dslaunch::runtime
