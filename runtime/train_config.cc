// ParseTrainConfig: JSON text -> TrainConfig (schema: docs/train-json.md). nlohmann_json stays in
// this file and the train_config_*.cc sections; its exceptions are caught here.
#include "runtime/train_config.h"

#include <algorithm>
#include <filesystem>
#include <limits>

#include "common/file_io.h"
#include "common/sha256.h"
#include "runtime/json_structure.h"
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

// One error naming every "auto" of the DeepSpeed keys, grouped by the file each came from: the
// Hugging Face Trainer fills them in before DeepSpeed sees the config; nothing else does.
Status CheckNoAuto(const Json& merged, const internal::ParseContext& ctx) {
  std::vector<std::pair<Json::json_pointer, std::string>> found;
  for (auto it = merged.begin(); it != merged.end(); ++it) {
    if (!IsRuntimeSection(it.key())) FindAuto(*it, Json::json_pointer() / it.key(), "$." + it.key(), &found);
  }
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

// Bounds of the batch sizes: far beyond any real run (DeepSpeed configs use hundreds), and small
// enough that the runtime's int-sized loop counters and buffer products cannot overflow.
constexpr int64_t kMaxMicroBatch = 1 << 20;
constexpr int64_t kMaxAccumulation = 1 << 20;

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

// Fills *config from the merged document; config->unimplemented_keys is where `root` collects.
Status ParseRoot(Section& root, int world_size, const std::string& base_dir, TrainConfig* config_out) {
  TrainConfig& config = *config_out;
  root.Known(kDeepSpeedConfigKey);
  std::optional<int64_t> batch, micro, accumulation;
  DSLAUNCH_RETURN_IF_ERROR(root.OptionalInt("train_batch_size", 1, kNoMax, &batch));
  DSLAUNCH_RETURN_IF_ERROR(root.OptionalInt("train_micro_batch_size_per_gpu", 1, kMaxMicroBatch, &micro));
  DSLAUNCH_RETURN_IF_ERROR(root.OptionalInt("gradient_accumulation_steps", 1, kMaxAccumulation, &accumulation));
  Result<BatchConfig> sizes = ResolveBatchSizes(batch, micro, accumulation, world_size);
  if (!sizes.ok()) return root.Error("train_batch_size", sizes.status().message());
  config.batch = *sizes;
  // Inferred sizes obey the bounds of given ones.
  if (config.batch.micro_batch_per_gpu > kMaxMicroBatch) {
    return root.Error("train_batch_size", "gives a micro batch of " + std::to_string(config.batch.micro_batch_per_gpu) +
                                              " per rank, more than " + std::to_string(kMaxMicroBatch) +
                                              ": set train_micro_batch_size_per_gpu");
  }
  if (config.batch.gradient_accumulation_steps > kMaxAccumulation) {
    return root.Error("train_batch_size", "gives " + std::to_string(config.batch.gradient_accumulation_steps) +
                                              " accumulation steps, more than " + std::to_string(kMaxAccumulation));
  }

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
  internal::ParseContext ctx{file, "", &inline_doc, &config.unimplemented_keys, &config.warnings};
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
