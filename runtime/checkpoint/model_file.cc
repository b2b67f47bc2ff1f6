#include "runtime/checkpoint/model_file.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>

#include "common/check.h"
#include "common/file_io.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/names.h"
#include "runtime/checkpoint/resume.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/checkpoint/shard_reader.h"
#include "runtime/config/train_config.h"
#include "runtime/core/sixteen_bit_float.h"

namespace dslaunch::runtime {
namespace fs = std::filesystem;
namespace {

constexpr char kHfConfigFile[] = "config.json";
// Hugging Face's GPT2LMHeadModel keeps its GPT2Model under this attribute name, so a checkpoint
// saved from the full model (older files, torch.save of the state dict) prefixes every name.
constexpr std::string_view kHfPrefix = "transformer.";
// The blocks' linear layers: nn.Linear [out][in] here, Conv1D [in][out] in GPT-2 checkpoints.
constexpr std::string_view kConv1DSuffixes[] = {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight",
                                                "mlp.c_proj.weight"};
// Buffers and tied weights in Hugging Face GPT-2 files that are not parameters here: the causal
// mask buffers of each block, and the output head (tied to wte).
constexpr std::string_view kIgnoredBlockSuffixes[] = {"attn.bias", "attn.masked_bias"};
constexpr std::string_view kIgnoredNames[] = {"lm_head.weight"};

// "h.<digits>.<suffix>" -> suffix; nullopt for names outside a block.
std::optional<std::string_view> BlockSuffix(std::string_view name) {
  if (!name.starts_with("h.")) return std::nullopt;
  size_t i = 2;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
  if (i == 2 || i >= name.size() || name[i] != '.') return std::nullopt;
  return name.substr(i + 1);
}

bool IsConv1DWeight(std::string_view name) {
  const std::optional<std::string_view> suffix = BlockSuffix(name);
  return suffix && std::find(std::begin(kConv1DSuffixes), std::end(kConv1DSuffixes), *suffix) != std::end(kConv1DSuffixes);
}

bool IsIgnoredHfTensor(std::string_view name) {
  if (std::find(std::begin(kIgnoredNames), std::end(kIgnoredNames), name) != std::end(kIgnoredNames)) return true;
  const std::optional<std::string_view> suffix = BlockSuffix(name);
  return suffix && std::find(std::begin(kIgnoredBlockSuffixes), std::end(kIgnoredBlockSuffixes), *suffix) !=
                       std::end(kIgnoredBlockSuffixes);
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// out[c][r] = in[r][c] for in [rows][cols].
void Transpose(const float* in, size_t rows, size_t cols, float* out) {
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
  }
}

// Shapes and offsets from meta.json are data: check them before they index the buffer.
Status CheckParameters(const CheckpointMeta& meta, const std::string& meta_path) {
  for (const CheckpointParameter& p : meta.parameters) {
    uint64_t n = 1;
    for (int64_t d : p.shape) n = d < 0 ? 0 : n * static_cast<uint64_t>(d);
    if (n != p.numel || p.offset > meta.numel || p.numel > meta.numel - p.offset) {
      return DataLossError(meta_path + ": parameter " + p.name + " of shape " + ShapeString(p.shape) + ", numel " +
                           std::to_string(p.numel) + " at offset " + std::to_string(p.offset) +
                           " does not fit the " + std::to_string(meta.numel) + " elements");
    }
  }
  return Status::Ok();
}

// The full fp32 "master" tensor, every shard verified against meta.json's CRC-32C first.
Result<std::vector<float>> AssembleMaster(const std::string& dir, const CheckpointMeta& meta) {
  ShardReader shards(dir, meta);
  DSLAUNCH_RETURN_IF_ERROR(shards.VerifyAll());
  std::vector<float> master(meta.numel);
  DSLAUNCH_RETURN_IF_ERROR(shards.Read("master", 0, meta.numel, master.data()));
  return master;
}

// A tensor's values in the file's dtype; `data` points into one of the vectors or elsewhere.
struct Encoded {
  std::vector<float> f32;
  std::vector<Half> f16;
  std::vector<BFloat16> bf16;
  const void* data = nullptr;
  size_t bytes = 0;
};

void Encode(std::span<const float> values, DType dtype, Encoded* out) {
  switch (dtype) {
    case DType::kFloat32:
      out->data = values.data();
      break;
    case DType::kFloat16:
      out->f16.resize(values.size());
      FloatToHalf(values, std::span<Half>(out->f16));
      out->data = out->f16.data();
      break;
    case DType::kBFloat16:
      out->bf16.resize(values.size());
      FloatToBFloat16(values, std::span<BFloat16>(out->bf16));
      out->data = out->bf16.data();
      break;
    case DType::kInt64:
    case DType::kUInt8:
      DSLAUNCH_CHECK(false) << "export to " << DTypeName(dtype);  // refused by ExportCheckpoint
  }
  out->bytes = values.size() * DTypeSize(dtype);
}

// The file's tensors: each planned parameter of `master`, transposed where the plan says, in
// `dtype`. The bytes live in `encoded` (one per tensor) or in `master`.
std::vector<TensorData> EncodeTensors(const std::vector<ExportedTensor>& plan, const std::vector<float>& master,
                                      DType dtype, std::vector<Encoded>& encoded) {
  std::vector<TensorData> tensors;
  for (size_t i = 0; i < plan.size(); ++i) {
    const ExportedTensor& t = plan[i];
    std::span<const float> values(master.data() + t.offset, t.numel);
    if (t.transposed) {
      encoded[i].f32.resize(t.numel);
      // The file's shape is [in][out]; ours [out = shape[1]][in = shape[0]].
      Transpose(values.data(), static_cast<size_t>(t.shape[1]), static_cast<size_t>(t.shape[0]), encoded[i].f32.data());
      values = encoded[i].f32;
    }
    Encode(values, dtype, &encoded[i]);
    tensors.push_back({t.name, std::string(SafetensorsDTypeName(dtype)), t.shape, encoded[i].data, encoded[i].bytes});
  }
  return tensors;
}

// n_head from the options and the train.json, checked against the checkpoint's shapes.
Result<int> ResolveHeads(const ExportOptions& options, const CheckpointMeta& meta, const GptShape& shape) {
  int n_head = options.n_head;
  if (!options.train_config.empty()) {
    DSLAUNCH_ASSIGN_OR_RETURN(TrainConfig config, ReadTrainConfig(options.train_config, std::max(1, meta.world_size)));
    const auto* gpt = std::get_if<GptConfig>(&config.model);
    if (gpt == nullptr) return InvalidArgumentError(options.train_config + ": model is not gpt; the checkpoint's is");
    if (gpt->n_layer != shape.n_layer || gpt->n_embd != shape.n_embd || gpt->vocab_size != shape.vocab_size ||
        gpt->block_size != shape.block_size) {
      return InvalidArgumentError(options.train_config + ": its model (n_layer " + std::to_string(gpt->n_layer) +
                                  ", n_embd " + std::to_string(gpt->n_embd) + ", vocab_size " +
                                  std::to_string(gpt->vocab_size) + ", block_size " + std::to_string(gpt->block_size) +
                                  ") is not the checkpoint's (" + std::to_string(shape.n_layer) + ", " +
                                  std::to_string(shape.n_embd) + ", " + std::to_string(shape.vocab_size) + ", " +
                                  std::to_string(shape.block_size) + ")");
    }
    if (n_head != 0 && n_head != gpt->n_head) {
      return InvalidArgumentError("n_head " + std::to_string(n_head) + " differs from " + options.train_config +
                                  "'s " + std::to_string(gpt->n_head));
    }
    n_head = gpt->n_head;
  }
  if (n_head <= 0) {
    return InvalidArgumentError("config.json needs the number of attention heads, which meta.json does not record: "
                                "give n_head (--n_head) or the run's train.json (--config)");
  }
  if (shape.n_embd % n_head != 0) {
    return InvalidArgumentError("n_head " + std::to_string(n_head) + " does not divide n_embd " + std::to_string(shape.n_embd));
  }
  return n_head;
}

// The file's tensor for each planned parameter, in plan order, checked (names, shapes and dtypes
// from the header only, before any data is read): kInvalidArgument naming the first problem.
Result<std::vector<const SafetensorsTensor*>> MatchTensors(const SafetensorsFile& file,
                                                           const std::vector<ExportedTensor>& plan,
                                                           std::string_view model) {
  const std::string& path = file.path();
  // The file's tensors by the name they stand for here.
  const bool gpt = model == "gpt";
  std::map<std::string, const SafetensorsTensor*, std::less<>> by_name;
  for (const SafetensorsTensor& t : file.tensors()) {
    std::string_view name = t.name;
    if (gpt && name.starts_with(kHfPrefix)) name.remove_prefix(kHfPrefix.size());
    if (gpt && IsIgnoredHfTensor(name)) continue;
    auto [it, inserted] = by_name.emplace(std::string(name), &t);
    if (!inserted) {
      return InvalidArgumentError(path + ": holds both " + it->second->name + " and " + t.name);
    }
  }
  // Check every name and shape (the header only) before reading any data.
  std::vector<const SafetensorsTensor*> sources;
  for (const ExportedTensor& want : plan) {
    auto it = by_name.find(want.name);
    if (it == by_name.end()) return InvalidArgumentError(path + ": no tensor \"" + want.name + "\"");
    const SafetensorsTensor& t = *it->second;
    if (t.shape != want.shape) {
      return InvalidArgumentError(path + ": tensor \"" + t.name + "\": expected shape " + ShapeString(want.shape) +
                                  ", found " + ShapeString(t.shape));
    }
    if (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16") {
      return InvalidArgumentError(path + ": tensor \"" + t.name + "\" is " + t.dtype + "; only F32, F16 and BF16 are read");
    }
    sources.push_back(&t);
    by_name.erase(it);
  }
  if (!by_name.empty()) {
    return InvalidArgumentError(path + ": tensor \"" + by_name.begin()->second->name + "\" is not a parameter of this " +
                                std::string(model) + " model");
  }
  return sources;
}

// Tensor `t` (F32, F16 or BF16) widened to fp32 into `values` (its element count).
Status ReadAsFloat(const SafetensorsFile& file, const SafetensorsTensor& t, std::vector<float>& values) {
  const size_t n = values.size();
  if (t.dtype == "F32") return file.Read(t, 0, values.data(), n * sizeof(float));
  if (t.dtype == "F16") {
    std::vector<Half> half(n);
    DSLAUNCH_RETURN_IF_ERROR(file.Read(t, 0, half.data(), n * sizeof(Half)));
    HalfToFloat(std::span<const Half>(half), std::span<float>(values));
    return Status::Ok();
  }
  std::vector<BFloat16> bf16(n);
  DSLAUNCH_RETURN_IF_ERROR(file.Read(t, 0, bf16.data(), n * sizeof(BFloat16)));
  BFloat16ToFloat(std::span<const BFloat16>(bf16), std::span<float>(values));
  return Status::Ok();
}

}  // namespace

Result<std::vector<ExportedTensor>> PlanExport(std::string_view model, const std::vector<CheckpointParameter>& parameters) {
  const bool gpt = model == "gpt";
  if (!gpt && model != "mlp") return InvalidArgumentError("cannot export model \"" + std::string(model) + "\": only gpt and mlp");
  std::vector<ExportedTensor> plan;
  for (const CheckpointParameter& p : parameters) {
    ExportedTensor t{p.name, p.shape, p.offset, p.numel, gpt && IsConv1DWeight(p.name)};
    if (t.transposed) {
      if (p.shape.size() != 2) return InvalidArgumentError(p.name + ": a linear weight of shape " + ShapeString(p.shape));
      t.shape = {p.shape[1], p.shape[0]};
    }
    plan.push_back(std::move(t));
  }
  return plan;
}

Result<GptShape> GptShapeFromParameters(const std::vector<CheckpointParameter>& parameters) {
  GptShape shape;
  const CheckpointParameter *wte = nullptr, *wpe = nullptr;
  for (const CheckpointParameter& p : parameters) {
    if (p.name == "wte.weight") wte = &p;
    if (p.name == "wpe.weight") wpe = &p;
    if (BlockSuffix(p.name) == "ln_1.weight") ++shape.n_layer;
  }
  if (wte == nullptr || wte->shape.size() != 2) return InvalidArgumentError("no 2-D wte.weight: not a gpt model");
  if (wpe == nullptr || wpe->shape.size() != 2) return InvalidArgumentError("no 2-D wpe.weight: not a gpt model");
  shape.vocab_size = static_cast<int>(wte->shape[0]);
  shape.n_embd = static_cast<int>(wte->shape[1]);
  shape.block_size = static_cast<int>(wpe->shape[0]);
  return shape;
}

std::string HfGpt2ConfigJson(const GptShape& shape, int n_head, DType dtype) {
  DSLAUNCH_CHECK(n_head > 0 && shape.n_embd % n_head == 0) << "n_head " << n_head << " for n_embd " << shape.n_embd;
  const char* torch_dtype = dtype == DType::kFloat16 ? "float16" : dtype == DType::kBFloat16 ? "bfloat16" : "float32";
  nlohmann::ordered_json j;
  j["model_type"] = "gpt2";
  j["architectures"] = nlohmann::ordered_json::array({"GPT2LMHeadModel"});
  j["n_layer"] = shape.n_layer;
  j["n_head"] = n_head;
  j["n_embd"] = shape.n_embd;
  j["n_positions"] = shape.block_size;
  j["n_ctx"] = shape.block_size;
  j["vocab_size"] = shape.vocab_size;
  j["activation_function"] = "gelu_new";  // GPT-2's tanh approximation, as runtime/ops/cpu/ops.h
  j["layer_norm_epsilon"] = 1e-5;          // ops::kLayerNormEps
  j["tie_word_embeddings"] = true;
  j["torch_dtype"] = torch_dtype;
  return j.dump(2) + "\n";
}

Result<ExportResult> ExportCheckpoint(const std::string& checkpoint, const std::string& out_path,
                                      const ExportOptions& options) {
  if (options.dtype != DType::kFloat32 && options.dtype != DType::kFloat16 && options.dtype != DType::kBFloat16) {
    return InvalidArgumentError("export: tensors are written as fp32, fp16 or bf16, not " +
                                std::string(DTypeName(options.dtype)));
  }
  DSLAUNCH_ASSIGN_OR_RETURN(const std::string dir, ResolveCheckpointPath(checkpoint));
  const std::string meta_path = (fs::path(dir) / kMetaFileName).string();
  DSLAUNCH_ASSIGN_OR_RETURN(CheckpointMeta meta, ReadCheckpointMeta(dir));
  DSLAUNCH_RETURN_IF_ERROR(CheckParameters(meta, meta_path));
  if (std::find(meta.state_tensors.begin(), meta.state_tensors.end(), "master") == meta.state_tensors.end()) {
    return DataLossError(meta_path + ": no \"master\" state tensor");
  }
  Result<std::vector<ExportedTensor>> planned = PlanExport(meta.model, meta.parameters);
  if (!planned.ok()) return planned.status().WithContext(meta_path);
  const std::vector<ExportedTensor>& plan = *planned;

  // Everything about config.json is checked before the shards are read.
  std::string config_json;
  if (options.hf_config) {
    if (meta.model != "gpt") return InvalidArgumentError("config.json: only for the gpt model; " + dir + " holds " + meta.model);
    Result<GptShape> shape = GptShapeFromParameters(meta.parameters);
    if (!shape.ok()) return shape.status().WithContext(meta_path);
    DSLAUNCH_ASSIGN_OR_RETURN(int n_head, ResolveHeads(options, meta, *shape));
    config_json = HfGpt2ConfigJson(*shape, n_head, options.dtype);
  }

  DSLAUNCH_ASSIGN_OR_RETURN(std::vector<float> master, AssembleMaster(dir, meta));
  std::vector<Encoded> encoded(plan.size());
  const std::vector<TensorData> tensors = EncodeTensors(plan, master, options.dtype, encoded);
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"dslaunch_step", std::to_string(meta.step)}, {"dslaunch_model", meta.model}};
  std::error_code ec;
  const fs::path parent = fs::absolute(out_path).parent_path();
  fs::create_directories(parent, ec);
  if (ec) return InternalError("cannot create " + parent.string() + ": " + ec.message());
  WriteOptions write;
  write.fsync = true;
  write.atomic = true;
  DSLAUNCH_ASSIGN_OR_RETURN(WriteResult written, WriteSafetensors(out_path, tensors, metadata, write));

  ExportResult result;
  result.checkpoint = dir;
  result.step = meta.step;
  result.tensors = tensors.size();
  result.bytes = written.bytes;
  if (options.hf_config) {
    result.config_json = (parent / kHfConfigFile).string();
    DSLAUNCH_RETURN_IF_ERROR(WriteFileAtomically(result.config_json, config_json));
    DSLAUNCH_RETURN_IF_ERROR(FsyncDirectory(parent.string()));
  }
  return result;
}

Status ExportCheckpoint(const std::string& checkpoint, const std::string& out_path, DType dtype) {
  ExportOptions options;
  options.dtype = dtype;
  return ExportCheckpoint(checkpoint, out_path, options).status();
}

Result<std::vector<float>> ImportParameters(const std::string& path, const ParameterLayout& layout, std::string_view model) {
  Result<std::vector<ExportedTensor>> planned = PlanExport(model, CheckpointParametersOf(layout));
  if (!planned.ok()) return planned.status().WithContext(path);
  const std::vector<ExportedTensor>& plan = *planned;
  DSLAUNCH_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(path));
  DSLAUNCH_ASSIGN_OR_RETURN(std::vector<const SafetensorsTensor*> sources, MatchTensors(file, plan, model));
  std::vector<float> flat(layout.numel());
  std::vector<float> values;
  for (size_t i = 0; i < plan.size(); ++i) {
    const ExportedTensor& want = plan[i];
    const SafetensorsTensor& t = *sources[i];
    values.resize(want.numel);
    DSLAUNCH_RETURN_IF_ERROR(ReadAsFloat(file, t, values));
    if (want.transposed) {
      // The file holds [in = shape[0]][out = shape[1]]; the flat buffer [out][in].
      Transpose(values.data(), static_cast<size_t>(want.shape[0]), static_cast<size_t>(want.shape[1]),
                flat.data() + want.offset);
    } else {
      std::copy(values.begin(), values.end(), flat.begin() + static_cast<std::ptrdiff_t>(want.offset));
    }
  }
  return flat;
}

}  // namespace dslaunch::runtime
