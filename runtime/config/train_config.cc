// ParseTrainConfig: JSON text -> TrainConfig (schema: docs/train-json.md). nlohmann_json stays in
// this file and the train_config_*.cc sections; its exceptions are caught here.
#include "runtime/config/train_config.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "common/auth/sha256.h"
#include "common/file_io.h"
#include "runtime/config/json_structure.h"
#include "runtime/config/sections.h"

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

std::string PositionText(const internal::TextPosition& at) {
  return "line " + std::to_string(at.line) + ", column " + std::to_string(at.column);
}

// A JSON path shortened for a message (a path 64 levels deep can be long).
std::string ShortPath(const std::string& path) {
  constexpr size_t kMaxPathChars = 160;
  return path.size() <= kMaxPathChars ? path : path.substr(0, kMaxPathChars - 3) + "...";
}

// "line L, column C: " of the token nlohmann quotes in "number overflow parsing '1e309'", or "".
std::string NumberOverflowPlace(std::string_view text, std::string_view what) {
  const size_t open = what.find('\''), close = what.rfind('\'');
  if (open == std::string_view::npos || close <= open + 1) return "";
  const size_t at = text.find(what.substr(open + 1, close - open - 1));
  if (at == std::string_view::npos) return "";
  internal::TextPosition pos;
  for (size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++pos.line;
      pos.column = 1;
    } else {
      ++pos.column;
    }
  }
  return PositionText(pos) + ": ";
}

// Text -> JSON object: the size and nesting limits first (before anything recursive touches the
// document), then the syntax, then duplicate keys (only meaningful once the syntax is valid).
Result<Json> ParseObject(std::string_view text, const std::string& file) {
  if (text.size() > kMaxConfigBytes) {
    return InvalidArgumentError(file + ": " + std::to_string(text.size()) + " bytes; a config may have at most " +
                                std::to_string(kMaxConfigBytes) + " (real ones are a few kilobytes)");
  }
  const internal::JsonStructure structure = internal::ScanJsonStructure(text, internal::kMaxJsonDepth);
  if (structure.too_deep_at) {
    return InvalidArgumentError(file + ": " + ShortPath(structure.too_deep_path) + ": nesting depth " +
                                std::to_string(internal::kMaxJsonDepth + 1) + " at " +
                                PositionText(*structure.too_deep_at) + " exceeds the limit of " +
                                std::to_string(internal::kMaxJsonDepth) + " levels of objects and arrays");
  }
  Json doc;
  try {
    doc = Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    return InvalidArgumentError(file + ": " + StripExceptionId(e.what()));
  } catch (const Json::out_of_range& e) {
    // A number past a double's range (1e309): nlohmann names the token but not where it is.
    return InvalidArgumentError(file + ": " + NumberOverflowPlace(text, e.what()) + StripExceptionId(e.what()) +
                                " (beyond the range of a double)");
  }
  if (structure.duplicate_at) {
    // DeepSpeed refuses duplicates too ("Duplicate keys in DeepSpeed config"); a JSON parser
    // would keep the last one silently.
    return InvalidArgumentError(file + ": " + ShortPath(structure.duplicate_path) + ": duplicate key at " +
                                PositionText(*structure.duplicate_at) + ", first at " +
                                PositionText(*structure.duplicate_first_at) + "; keep one of them");
  }
  if (!doc.is_object()) return InvalidArgumentError(file + ": $: expected a JSON object, got " + internal::Describe(doc));
  return doc;
}

// The runtime's own sections: "auto" there is not the HF Trainer's placeholder (checkpoint.load
// "auto" is a value of its own).
bool IsRuntimeSection(const std::string& key) {
  return key == "model" || key == "data" || key == "train" || key == "checkpoint";
}

// Every string value "auto" under `value` (depth is bounded by kMaxJsonDepth).
void FindAuto(const Json& value, const Json::json_pointer& pointer, const std::string& path,
              std::vector<std::pair<Json::json_pointer, std::string>>* out) {
  if (value.is_string() && value.get_ref<const std::string&>() == "auto") out->emplace_back(pointer, path);
  if (value.is_object()) {
    for (auto it = value.begin(); it != value.end(); ++it) {
      FindAuto(*it, pointer / it.key(), internal::ChildPath(path, it.key()), out);
    }
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      FindAuto(value[i], pointer / i, path + "[" + std::to_string(i) + "]", out);
    }
  }
}

// Whether `path` ("$.zero_optimization.sub_group_size") is an offload buffer key, whose "auto" this
// runtime resolves itself (runtime/config/buffer_keys.h).
bool IsSizableKey(const std::string& path) {
  for (int k = 0; k < kBufferKeyCount; ++k) {
    if (path == "$." + std::string(BufferKeyPath(static_cast<BufferKey>(k)))) return true;
  }
  return false;
}

// One error naming every "auto" of the DeepSpeed keys, grouped by the file each came from: the
// Hugging Face Trainer fills them in before DeepSpeed sees the config; nothing else does. The
// offload buffer keys are the exception: "auto" there is sized to fit the node.
Status CheckNoAuto(const Json& merged, const internal::ParseContext& ctx) {
  std::vector<std::pair<Json::json_pointer, std::string>> found;
  for (auto it = merged.begin(); it != merged.end(); ++it) {
    if (!IsRuntimeSection(it.key())) FindAuto(*it, Json::json_pointer() / it.key(), "$." + it.key(), &found);
  }
  std::erase_if(found, [](const auto& entry) { return IsSizableKey(entry.second); });
  if (found.empty()) return Status::Ok();
  std::vector<std::pair<std::string, std::string>> by_file;  // file, paths
  for (const auto& [pointer, path] : found) {
    const bool inline_key = ctx.referenced_file.empty() || ctx.inline_doc->contains(pointer);
    const std::string& file = inline_key ? ctx.main_file : ctx.referenced_file;
    auto group = std::find_if(by_file.begin(), by_file.end(), [&](const auto& g) { return g.first == file; });
    if (group == by_file.end()) group = by_file.insert(by_file.end(), {file, ""});
    group->second += (group->second.empty() ? "" : ", ") + path;
  }
  std::string where;
  for (const auto& [file, paths] : by_file) where += (where.empty() ? "" : "; ") + file + ": " + paths;
  return InvalidArgumentError(where + ": " + std::to_string(found.size()) + (found.size() == 1 ? " value is" : " values are") +
                              " \"auto\", which only the Hugging Face Trainer fills in; give " +
                              (found.size() == 1 ? "it a value" : "each a value"));
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

// Fills *config from the merged document. Every section is read whatever the others held, so that
// one run reports every error: a wrong value is reported by its getter, a section that cannot be
// read further returns its error, and both land in the context's list (`root.Report`). Where a
// section depends on another (the data on the model, offload_param on the stage), a wrong source
// skips only the checks against it.
void ParseRoot(Section& root, int world_size, int generation, const std::string& base_dir, TrainConfig* config_out) {
  TrainConfig& config = *config_out;
  root.Known(kDeepSpeedConfigKey);
  // The batch counts data-parallel copies: with pipeline stages and tensor ranks, world / (stages x
  // tensor ranks) of them.
  root.Report(internal::ParsePipeline(root, &config.pipeline));
  root.Report(internal::ParseTensorParallel(root, &config.tensor_parallel));
  const int per_copy = RanksPerModelCopy(config);
  const int data_parallel = world_size % per_copy == 0 ? world_size / per_copy : world_size;
  root.Report(internal::ParseBatch(root, data_parallel, generation, &config));

  EngineOptions& engine = config.engine;
  root.Report(internal::ParseOptimizer(root, &engine.optimizer, &config.default_optimizer));
  root.Report(internal::ParseScheduler(root, &engine.schedule));
  root.Double("gradient_clipping", 0.0, std::numeric_limits<double>::max(), &engine.gradient_clipping);
  root.Report(internal::ParsePrecision(root, &engine.loss_scaler, &engine.precision));
  bool stage_known = true;
  root.Report(internal::ParseZero(root, &engine.zero, &stage_known, &config.buffer_keys));
  // With a wrong stage (reported), offload_param is checked as at stage 3, where it is allowed.
  constexpr int kStageThatAllowsEveryOffload = 3;
  root.Report(internal::ParseOffloadParam(root, stage_known ? engine.zero.stage : kStageThatAllowsEveryOffload,
                                          base_dir, &engine.offload_param, &config.buffer_keys));
  root.Report(
      internal::ParseOptimizerOffload(root, base_dir, &engine.offload_optimizer, &engine.aio, &config.buffer_keys));
  root.Int("steps_per_print", 1, kNoMax, &config.steps_per_print);
  int64_t seed = static_cast<int64_t>(config.seed);
  root.Int("seed", 0, kNoMax, &seed);
  config.seed = static_cast<uint64_t>(seed);
  size_t device = static_cast<size_t>(config.device);
  root.Choice("device", {"auto", "cpu", "cuda"}, /*ignore_case=*/false, &device);
  config.device = static_cast<TrainDevice>(device);
  internal::CollectUnimplementedTopLevel(root);

  const size_t errors_before_model = root.ErrorCount();
  root.Report(internal::ParseModel(root, base_dir, &config.model, &config.model_init_from));
  const bool model_known = root.ErrorCount() == errors_before_model;
  auto* gpt = model_known ? std::get_if<GptConfig>(&config.model) : nullptr;
  // Without a valid model the block is still checked, against the largest n_layer.
  GptConfig unknown_model;
  root.Report(internal::ParseActivationCheckpointing(
      root, gpt != nullptr ? gpt->n_layer : kMaxGptLayers,
      gpt != nullptr ? &gpt->recompute_blocks : model_known ? nullptr : &unknown_model.recompute_blocks));
  const ModelConfig* model = model_known ? &config.model : nullptr;
  root.Report(internal::ParseData(root, model, base_dir, &config.data));
  root.Report(internal::ParseTrainLoop(root, model, &config.train));
  root.Report(internal::ParseCheckpoint(root, base_dir, generation, &config.checkpoint));
  root.Report(internal::CheckPipeline(root, config, world_size));
  root.Report(internal::CheckTensorParallel(root, config, world_size));
  root.Finish();
}

// Every error of one parse as one status: the only one as it is, or a count followed by one line
// per error, sorted (by file, then JSON path) so that the order is stable from run to run.
Status CollectedErrors(std::vector<std::string> errors) {
  if (errors.empty()) return Status::Ok();
  std::sort(errors.begin(), errors.end());
  errors.erase(std::unique(errors.begin(), errors.end()), errors.end());
  if (errors.size() == 1) return InvalidArgumentError(errors.front());
  std::string message = std::to_string(errors.size()) + " errors in the configuration:";
  for (const std::string& e : errors) message += "\n  " + e;
  return InvalidArgumentError(message);
}

Result<TrainConfig> ParseUnguarded(std::string_view json_text, const std::string& file, int world_size,
                                   const ConfigLoader& loader, int generation, ConfigKeys* keys_read = nullptr) {
  if (world_size < 1) return InvalidArgumentError(file + ": world size " + std::to_string(world_size) + " < 1");
  if (generation < 0) return InvalidArgumentError(file + ": generation " + std::to_string(generation) + " < 0");
  DSLAUNCH_ASSIGN_OR_RETURN(Json inline_doc, ParseObject(json_text, file));
  std::string base_dir = std::filesystem::path(file).parent_path().string();
  TrainConfig config;
  std::vector<std::string> errors;
  internal::ParseContext ctx{file, "", &inline_doc, &config.unimplemented_keys, &config.warnings, &errors, keys_read};
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
  DSLAUNCH_RETURN_IF_ERROR(CheckNoAuto(merged, ctx));
  Section root(&ctx, &merged, "$", Json::json_pointer());
  ParseRoot(root, world_size, generation, base_dir, &config);
  DSLAUNCH_RETURN_IF_ERROR(CollectedErrors(std::move(errors)));
  return config;
}

}  // namespace

Result<TrainConfig> ParseTrainConfig(std::string_view json_text, std::string_view path, int world_size,
                                     const ConfigLoader& loader, int generation) {
  std::string file(path);
  try {
    return ParseUnguarded(json_text, file, world_size, loader, generation);
  } catch (const std::exception& e) {  // nlohmann_json must not escape; any throw here is a bug
    return InternalError(file + ": unexpected error while parsing: " + StripExceptionId(e.what()));
  }
}

Result<ConfigKeys> ConfigKeysRead(std::string_view json_text, std::string_view path, int world_size,
                                  const ConfigLoader& loader) {
  std::string file(path);
  ConfigKeys keys;
  try {
    DSLAUNCH_RETURN_IF_ERROR(ParseUnguarded(json_text, file, world_size, loader, 0, &keys).status());
  } catch (const std::exception& e) {
    return InternalError(file + ": unexpected error while parsing: " + StripExceptionId(e.what()));
  }
  return keys;
}

Result<TrainConfig> ReadTrainConfig(const std::string& path, int world_size, int generation) {
  // Every file the config is read from goes into its hash (the checkpoint records it).
  Sha256 hash;
  ConfigLoader hashing_read = [&](const std::string& file) -> Result<std::string> {
    std::error_code ec;
    if (std::filesystem::is_regular_file(file, ec) && std::filesystem::file_size(file, ec) > kMaxConfigBytes) {
      return InvalidArgumentError(file + ": " + std::to_string(std::filesystem::file_size(file, ec)) +
                                  " bytes; a config may have at most " + std::to_string(kMaxConfigBytes));
    }
    DSLAUNCH_ASSIGN_OR_RETURN(std::string text, ReadFile(file));
    hash.Update(text);
    return text;
  };
  DSLAUNCH_ASSIGN_OR_RETURN(std::string text, hashing_read(path));
  DSLAUNCH_ASSIGN_OR_RETURN(TrainConfig config, ParseTrainConfig(text, path, world_size, hashing_read, generation));
  config.source_sha256 = HexEncode(DigestBytes(hash.Finish()));
  return config;
}

std::string UnimplementedWarning(const TrainConfig& config) {
  if (config.unimplemented_keys.empty()) return "";
  std::string keys;
  for (const std::string& k : config.unimplemented_keys) keys += (keys.empty() ? "" : ", ") + k;
  return "warning: " + std::to_string(config.unimplemented_keys.size()) +
         " DeepSpeed key(s) not implemented here, ignored: " + keys;
}

std::string DefaultOptimizerNote(const TrainConfig& config) {
  if (!config.default_optimizer) return "";
  const OptimizerParams& o = config.engine.optimizer;
  char line[256];
  std::snprintf(line, sizeof(line),
                "optimizer: no \"optimizer\" section; training with AdamW (lr %g, betas [%g, %g], eps %g, "
                "weight_decay %g), DeepSpeed's defaults for {\"type\": \"AdamW\"}",
                o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
  return line;
}

std::string_view TrainDeviceName(TrainDevice device) {
  switch (device) {
    case TrainDevice::kAuto: return "auto";
    case TrainDevice::kCpu: return "cpu";
    case TrainDevice::kCuda: return "cuda";
  }
  return "?";
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

}  // namespace dslaunch::runtime
