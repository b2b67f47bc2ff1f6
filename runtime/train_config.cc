// ParseTrainConfig: JSON text -> TrainConfig (schema: docs/train-json.md). nlohmann_json stays in
// this file and the train_config_*.cc sections; its exceptions are caught here.
#include "runtime/train_config.h"

#include <filesystem>
#include <limits>

#include "common/file_io.h"
#include "common/sha256.h"
#include "runtime/train_config_sections.h"

namespace dslaunch::runtime {
namespace {

using internal::Json;
using internal::kNoMax;
using internal::Section;

constexpr char kDeepSpeedConfigKey[] = "deepspeed_config";

// nlohmann's messages start with "[json.exception.parse_error.101] "; the id means nothing to users.
std::string StripExceptionId(const std::string& what) {
  size_t end = what.find("] ");
  return end == std::string::npos ? what : what.substr(end + 2);
}

Result<Json> ParseObject(std::string_view text, const std::string& file) {
  Json doc;
  try {
    doc = Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    return InvalidArgumentError(file + ": " + StripExceptionId(e.what()));
  }
  if (!doc.is_object()) return InvalidArgumentError(file + ": $: expected a JSON object, got " + internal::Describe(doc));
  return doc;
}

// Keys of `over` replace those of `base`; where both hold objects they merge key by key.
void DeepMerge(Json& base, const Json& over) {
  for (auto it = over.begin(); it != over.end(); ++it) {
    auto found = base.find(it.key());
    if (found != base.end() && found->is_object() && it->is_object()) {
      DeepMerge(*found, *it);
    } else {
      base[it.key()] = *it;
    }
  }
}

std::string BatchProduct(int64_t micro, int64_t accumulation, int world) {
  return "micro " + std::to_string(micro) + " x accumulation " + std::to_string(accumulation) + " x world " +
         std::to_string(world) + " = " + std::to_string(micro * accumulation * world);
}

// Fills *config from the merged document; config->unimplemented_keys is where `root` collects.
Status ParseRoot(Section& root, int world_size, const std::string& base_dir, TrainConfig* config_out) {
  TrainConfig& config = *config_out;
  root.Known(kDeepSpeedConfigKey);
  std::optional<int64_t> batch, micro, accumulation;
  DSLAUNCH_RETURN_IF_ERROR(root.OptionalInt("train_batch_size", 1, kNoMax, &batch));
  DSLAUNCH_RETURN_IF_ERROR(root.OptionalInt("train_micro_batch_size_per_gpu", 1, kNoMax, &micro));
  DSLAUNCH_RETURN_IF_ERROR(root.OptionalInt("gradient_accumulation_steps", 1, kNoMax, &accumulation));
  Result<BatchConfig> sizes = ResolveBatchSizes(batch, micro, accumulation, world_size);
  if (!sizes.ok()) return root.Error("train_batch_size", sizes.status().message());
  config.batch = *sizes;

  DSLAUNCH_RETURN_IF_ERROR(internal::ParseOptimizer(root, &config.optimizer));
  DSLAUNCH_RETURN_IF_ERROR(internal::ParseScheduler(root, config.optimizer, &config.scheduler));
  DSLAUNCH_RETURN_IF_ERROR(root.Double("gradient_clipping", 0.0, std::numeric_limits<double>::max(),
                                       &config.gradient_clipping));
  DSLAUNCH_RETURN_IF_ERROR(internal::ParsePrecision(root, &config.fp16, &config.bf16, &config.precision));
  DSLAUNCH_RETURN_IF_ERROR(internal::ParseZero(root, &config.zero));
  DSLAUNCH_RETURN_IF_ERROR(root.Int("steps_per_print", 1, kNoMax, &config.steps_per_print));
  int64_t seed = static_cast<int64_t>(config.seed);
  DSLAUNCH_RETURN_IF_ERROR(root.Int("seed", 0, kNoMax, &seed));
  config.seed = static_cast<uint64_t>(seed);
  internal::CollectUnimplementedTopLevel(root);

  DSLAUNCH_RETURN_IF_ERROR(internal::ParseModel(root, base_dir, &config.model, &config.model_init_from));
  DSLAUNCH_RETURN_IF_ERROR(internal::ParseData(root, config.model, base_dir, &config.data));
  DSLAUNCH_RETURN_IF_ERROR(internal::ParseTrainLoop(root, config.model, &config.train));
  DSLAUNCH_RETURN_IF_ERROR(internal::ParseCheckpoint(root, base_dir, &config.checkpoint));
  return root.Finish();
}

Result<TrainConfig> ParseUnguarded(std::string_view json_text, const std::string& file, int world_size,
                                   const ConfigLoader& loader) {
  if (world_size < 1) return InvalidArgumentError(file + ": world size " + std::to_string(world_size) + " < 1");
  DSLAUNCH_ASSIGN_OR_RETURN(Json inline_doc, ParseObject(json_text, file));
  std::string base_dir = std::filesystem::path(file).parent_path().string();
  TrainConfig config;
  internal::ParseContext ctx{file, "", &inline_doc, &config.unimplemented_keys};
  Json merged = inline_doc;
  auto ref = inline_doc.find(kDeepSpeedConfigKey);
  if (ref != inline_doc.end()) {
    if (!ref->is_string() || ref->get<std::string>().empty()) {
      return InvalidArgumentError(file + ": $." + kDeepSpeedConfigKey + ": expected a file name, got " +
                                  internal::Describe(*ref));
    }
    std::string ds_path = internal::ResolvePath(base_dir, ref->get<std::string>());
    Result<std::string> text = loader(ds_path);
    if (!text.ok()) return text.status().WithContext(file + ": $." + kDeepSpeedConfigKey);
    DSLAUNCH_ASSIGN_OR_RETURN(merged, ParseObject(*text, ds_path));
    if (merged.contains(kDeepSpeedConfigKey)) {
      return InvalidArgumentError(ds_path + ": $." + kDeepSpeedConfigKey + ": a referenced config cannot " +
                                  "reference another");
    }
    DeepMerge(merged, inline_doc);
    ctx.referenced_file = ds_path;
    config.deepspeed_config_path = ds_path;
  }
  Section root(&ctx, &merged, "$", Json::json_pointer());
  DSLAUNCH_RETURN_IF_ERROR(ParseRoot(root, world_size, base_dir, &config));
  return config;
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
    int64_t per_step = *micro_batch_per_gpu * world;
    if (*train_batch_size % per_step != 0) {
      return InvalidArgumentError("train_batch_size " + std::to_string(*train_batch_size) +
                                  " is not a multiple of micro " + std::to_string(*micro_batch_per_gpu) +
                                  " x world " + std::to_string(world) + " = " + std::to_string(per_step));
    }
    b = {*train_batch_size, *micro_batch_per_gpu, *train_batch_size / per_step};
  } else if (train_batch_size) {
    int64_t accumulation = gradient_accumulation_steps.value_or(1);
    int64_t per_micro = accumulation * world;
    if (*train_batch_size % per_micro != 0) {
      return InvalidArgumentError("train_batch_size " + std::to_string(*train_batch_size) +
                                  " is not a multiple of accumulation " + std::to_string(accumulation) +
                                  " x world " + std::to_string(world) + " = " + std::to_string(per_micro));
    }
    b = {*train_batch_size, *train_batch_size / per_micro, accumulation};
  } else {
    int64_t accumulation = gradient_accumulation_steps.value_or(1);
    b = {*micro_batch_per_gpu * accumulation * world, *micro_batch_per_gpu, accumulation};
  }
  if (b.train_batch_size != b.micro_batch_per_gpu * b.gradient_accumulation_steps * world) {
    return InvalidArgumentError("train_batch_size " + std::to_string(b.train_batch_size) + " != " +
                                BatchProduct(b.micro_batch_per_gpu, b.gradient_accumulation_steps, world_size));
  }
  return b;
}

Result<TrainConfig> ParseTrainConfig(std::string_view json_text, std::string_view path, int world_size,
                                     const ConfigLoader& loader) {
  std::string file(path);
  try {
    return ParseUnguarded(json_text, file, world_size, loader);
  } catch (const std::exception& e) {  // nlohmann_json must not escape; any throw here is a bug
    return InternalError(file + ": unexpected error while parsing: " + StripExceptionId(e.what()));
  }
}

Result<TrainConfig> ReadTrainConfig(const std::string& path, int world_size) {
  // Every file the config is read from goes into its hash (the checkpoint records it).
  Sha256 hash;
  ConfigLoader hashing_read = [&](const std::string& file) -> Result<std::string> {
    DSLAUNCH_ASSIGN_OR_RETURN(std::string text, ReadFile(file));
    hash.Update(text);
    return text;
  };
  DSLAUNCH_ASSIGN_OR_RETURN(std::string text, hashing_read(path));
  DSLAUNCH_ASSIGN_OR_RETURN(TrainConfig config, ParseTrainConfig(text, path, world_size, hashing_read));
  config.source_sha256 = HexEncode(DigestBytes(hash.Finish()));
  return config;
}

std::string UnimplementedWarning(const TrainConfig& config) {
  if (config.unimplemented_keys.empty()) return "";
  std::string keys;
  for (const std::string& k : config.unimplemented_keys) keys += (keys.empty() ? "" : ", ") + k;
  return "warning: " + std::to_string(config.unimplemented_keys.size()) +
         " DeepSpeed key(s) not implemented by dslaunch-worker and ignored: " + keys;
}

std::string_view OptimizerTypeName(OptimizerKind type) {
  switch (type) {
    case OptimizerKind::kAdam: return "adam";
    case OptimizerKind::kAdamW: return "adamw";
    case OptimizerKind::kSgd: return "sgd";
  }
  return "unknown";
}

std::string_view SchedulerTypeName(LrScheduleKind type) {
  switch (type) {
    case LrScheduleKind::kConstant: return "constant";
    case LrScheduleKind::kWarmupLr: return "warmup_lr";
    case LrScheduleKind::kWarmupDecayLr: return "warmup_decay_lr";
    case LrScheduleKind::kWarmupCosineLr: return "warmup_cosine_lr";
  }
  return "unknown";
}

std::string_view PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32: return "fp32";
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
  }
  return "unknown";
}

}  // namespace dslaunch::runtime
