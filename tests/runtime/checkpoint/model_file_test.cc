// Model export and import (docs/checkpoint.md, "Export and import"): checkpoints written by real
// training runs with the in-process communicator, exported to one safetensors file and read back.
#include "runtime/checkpoint/model_file.h"

#include <doctest/doctest.h>

#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "runtime/checkpoint/safetensors.h"
#include "runtime/core/sixteen_bit_float.h"
#include "runtime/data/idx_synthetic.h"
#include "runtime/models/gpt.h"
#include "runtime/models/mlp.h"
#include "runtime/train/trainer.h"
#include "tests/fakes/train_on_threads.h"
#include "tests/support/subprocess.h"

namespace dslaunch::runtime {
namespace {

namespace fs = std::filesystem;

const GptConfig kGpt{2, 2, 16, 8, 32};

TrainConfig GptTrainConfig(int world, int64_t steps) {
  TrainConfig c;
  c.batch.train_batch_size = 8;
  c.batch.micro_batch_per_gpu = 2;
  c.batch.gradient_accumulation_steps = 8 / (2 * world);
  c.engine.optimizer.kind = OptimizerKind::kAdamW;
  c.engine.optimizer.lr = 3e-3;
  c.model = kGpt;
  c.data.seq_len = 8;
  c.train.steps = steps;
  c.train.eval_steps = 1;
  c.steps_per_print = 100;
  c.seed = 5;
  c.engine.zero.stage = 1;
  c.source_sha256 = "test";
  return c;
}

TrainData TokenData() { return testing::PatternTokens(/*validation=*/false); }

// Runs `config` on `world` threads; returns rank 0's result.
Result<TrainResult> Run(int world, const TrainConfig& config, const TrainData& data) {
  return testing::TrainOnThreads(world, config, data)[0];
}

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The reference: the "master" tensor assembled from the shards as meta.json lays them out.
std::vector<float> MasterFromShards(const fs::path& step_dir) {
  auto meta = CheckpointMetaFromJson(Slurp(step_dir / "meta.json"), "meta.json");
  REQUIRE_MESSAGE(meta.ok(), meta.status().ToString());
  std::vector<float> master(meta->numel);
  for (const auto& part : meta->partitions) {
    auto file = SafetensorsFile::Open((step_dir / part.file).string());
    REQUIRE(file.ok());
    const SafetensorsTensor* t = file->Find("master");
    REQUIRE(t != nullptr);
    REQUIRE(file->Read(*t, 0, master.data() + part.begin, t->bytes()).ok());
  }
  return master;
}

// A gpt checkpoint of world size 2 after 3 steps, made once and shared (read-only) by the cases.
struct GptCheckpoint {
  dslaunch::testing::TempDir dir;
  std::string ckpt;
  GptModel model{kGpt, 1};
  std::vector<float> master;

  GptCheckpoint() {
    TrainConfig c = GptTrainConfig(2, 3);
    ckpt = dir.path() + "/ckpt";
    c.checkpoint.dir = ckpt;
    auto r = Run(2, c, TokenData());
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    master = MasterFromShards(fs::path(ckpt) / "global_step3");
  }
  std::string Out(const std::string& name) const { return dir.path() + "/" + name; }
};

const GptCheckpoint& Gpt() {
  static const GptCheckpoint checkpoint;
  return checkpoint;
}

TEST_CASE("An fp32 export imports back to exactly the checkpoint's master weights") {
  const GptCheckpoint& g = Gpt();
  const std::string out = g.Out("model.safetensors");
  ExportOptions options;
  auto exported = ExportCheckpoint(g.ckpt, out, options);  // the checkpoint directory: its `latest`
  REQUIRE_MESSAGE(exported.ok(), exported.status().ToString());
  CHECK(exported->step == 3);
  CHECK(fs::path(exported->checkpoint).filename() == "global_step3");
  CHECK(exported->config_json.empty());
  CHECK_FALSE(fs::exists(g.Out("config.json")));
  auto imported = ImportParameters(out, g.model.layout(), "gpt");
  REQUIRE_MESSAGE(imported.ok(), imported.status().ToString());
  CHECK(*imported == g.master);  // bitwise
  // Training moved the weights away from their initialisation.
  std::vector<float> init(g.model.layout().numel());
  g.model.InitParameters(init, 5);
  CHECK(*imported != init);

  auto file = SafetensorsFile::Open(out);
  REQUIRE(file.ok());
  CHECK(file->metadata().at("format") == "pt");
  CHECK(file->metadata().at("dslaunch_step") == "3");
  CHECK(file->metadata().at("dslaunch_model") == "gpt");
}

TEST_CASE("The gpt export has Hugging Face GPT-2 names and Conv1D [in][out] linear weights") {
  const GptCheckpoint& g = Gpt();
  const std::string out = g.Out("hf.safetensors");
  REQUIRE(ExportCheckpoint(g.ckpt + "/global_step3", out, DType::kFloat32).ok());
  auto file = SafetensorsFile::Open(out);
  REQUIRE(file.ok());
  std::set<std::string> names;
  for (const auto& t : file->tensors()) names.insert(t.name);
  std::set<std::string> expected = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"};
  for (int i = 0; i < 2; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    for (const char* s : {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                          "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                          "mlp.c_proj.weight", "mlp.c_proj.bias"}) {
      expected.insert(h + s);
    }
  }
  CHECK(names == expected);  // no lm_head: tied to wte
  const std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"wte.weight", {32, 16}},          {"wpe.weight", {8, 16}},           {"h.0.attn.c_attn.weight", {16, 48}},
      {"h.0.attn.c_attn.bias", {48}},    {"h.1.attn.c_proj.weight", {16, 16}}, {"h.1.mlp.c_fc.weight", {16, 64}},
      {"h.1.mlp.c_proj.weight", {64, 16}}, {"ln_f.bias", {16}}};
  for (const auto& [name, shape] : shapes) {
    CAPTURE(name);
    REQUIRE(file->Find(name) != nullptr);
    CHECK(file->Find(name)->shape == shape);
    CHECK(file->Find(name)->dtype == "F32");
  }
  // c_attn: ours [48][16] (nn.Linear), the file's [16][48] (Conv1D) is its transpose.
  const TensorInfo* ours = g.model.layout().Find("h.0.attn.c_attn.weight");
  REQUIRE(ours != nullptr);
  std::vector<float> hf(16 * 48);
  REQUIRE(file->Read(*file->Find("h.0.attn.c_attn.weight"), 0, hf.data(), hf.size() * sizeof(float)).ok());
  bool transposed = true;
  for (int o = 0; o < 48; ++o) {
    for (int i = 0; i < 16; ++i) transposed = transposed && hf[i * 48 + o] == g.master[ours->offset + o * 16 + i];
  }
  CHECK(transposed);
  // Not transposed: embeddings and biases are as they are.
  const TensorInfo* wte = g.model.layout().Find("wte.weight");
  std::vector<float> hf_wte(wte->numel);
  REQUIRE(file->Read(*file->Find("wte.weight"), 0, hf_wte.data(), hf_wte.size() * sizeof(float)).ok());
  CHECK(std::equal(hf_wte.begin(), hf_wte.end(), g.master.begin() + static_cast<std::ptrdiff_t>(wte->offset)));
}

TEST_CASE("bf16 and fp16 exports round-trip within the dtype's rounding") {
  const GptCheckpoint& g = Gpt();
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    CAPTURE(DTypeName(dtype));
    const std::string out = g.Out("model16.safetensors");
    REQUIRE(ExportCheckpoint(g.ckpt, out, dtype).ok());
    auto file = SafetensorsFile::Open(out);
    REQUIRE(file.ok());
    CHECK(file->Find("h.0.attn.c_attn.weight")->dtype == SafetensorsDTypeName(dtype));
    CHECK(fs::file_size(out) < g.master.size() * 3);  // 2 bytes per element and a header
    auto imported = ImportParameters(out, g.model.layout(), "gpt");
    REQUIRE_MESSAGE(imported.ok(), imported.status().ToString());
    REQUIRE(imported->size() == g.master.size());
    // Exactly the nearest 16-bit value, which is within half a unit in the last place.
    const float rel = dtype == DType::kBFloat16 ? 1.0f / 256 : 1.0f / 2048;
    size_t wrong = 0, far = 0;
    for (size_t i = 0; i < g.master.size(); ++i) {
      const float x = g.master[i];
      const float rounded = dtype == DType::kBFloat16 ? BFloat16ToFloat(FloatToBFloat16(x)) : HalfToFloat(FloatToHalf(x));
      wrong += (*imported)[i] != rounded;
      far += std::abs((*imported)[i] - x) > std::abs(x) * rel + 6e-8f;  // + fp16's subnormal step
    }
    CHECK(wrong == 0);
    CHECK(far == 0);
  }
}

TEST_CASE("Export refuses a corrupt shard, naming it, and a missing checkpoint") {
  const GptCheckpoint& g = Gpt();
  dslaunch::testing::TempDir dir;
  fs::copy(g.ckpt, dir.path() + "/ckpt", fs::copy_options::recursive);
  const fs::path shard = fs::path(dir.path()) / "ckpt" / "global_step3" / "rank00001.safetensors";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(shard) - 5));
    f.put('\x7f');
  }
  const std::string out = dir.path() + "/model.safetensors";
  Status s = ExportCheckpoint(dir.path() + "/ckpt", out, DType::kFloat32);
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == StatusCode::kDataLoss);
  CHECK(s.message().find("rank00001.safetensors is corrupt: CRC-32C") != std::string::npos);
  CHECK_FALSE(fs::exists(out));

  s = ExportCheckpoint(dir.path() + "/nothing", out, DType::kFloat32);
  CHECK(s.code() == StatusCode::kNotFound);
}

TEST_CASE("With hf_config the gpt export writes GPT-2's config.json and needs n_head") {
  const GptCheckpoint& g = Gpt();
  dslaunch::testing::TempDir dir;
  ExportOptions options;
  options.hf_config = true;
  options.dtype = DType::kBFloat16;
  Result<ExportResult> r = ExportCheckpoint(g.ckpt, dir.path() + "/model.safetensors", options);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message().find("heads") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.path() + "/model.safetensors"));  // checked before anything is written

  options.n_head = 3;  // does not divide 16
  CHECK_FALSE(ExportCheckpoint(g.ckpt, dir.path() + "/model.safetensors", options).ok());

  options.n_head = 2;
  r = ExportCheckpoint(g.ckpt, dir.path() + "/model.safetensors", options);
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(r->config_json == (fs::path(dir.path()) / "config.json").string());
  const nlohmann::json j = nlohmann::json::parse(Slurp(r->config_json));
  CHECK(j["model_type"] == "gpt2");
  CHECK(j["architectures"] == nlohmann::json::array({"GPT2LMHeadModel"}));
  CHECK(j["n_layer"] == 2);
  CHECK(j["n_head"] == 2);
  CHECK(j["n_embd"] == 16);
  CHECK(j["n_positions"] == 8);
  CHECK(j["n_ctx"] == 8);
  CHECK(j["vocab_size"] == 32);
  CHECK(j["activation_function"] == "gelu_new");
  CHECK(j["layer_norm_epsilon"] == 1e-5);
  CHECK(j["tie_word_embeddings"] == true);
  CHECK(j["torch_dtype"] == "bfloat16");

  // n_head from a train.json, which must describe the checkpoint's model.
  const std::string train_json = dir.path() + "/train.json";
  auto write_config = [&](int n_embd) {
    std::ofstream(train_json) << R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
      "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
      "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": )" << n_embd
                              << R"(, "block_size": 8, "vocab_size": 32},
      "data": {"train": "train.bin"}, "train": {"steps": 3}})";
  };
  write_config(16);
  options.n_head = 0;
  options.train_config = train_json;
  r = ExportCheckpoint(g.ckpt, dir.path() + "/model.safetensors", options);
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  write_config(32);
  r = ExportCheckpoint(g.ckpt, dir.path() + "/model.safetensors", options);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("is not the checkpoint's") != std::string::npos);
}

TEST_CASE("The mlp export keeps our names and [out][in] layouts and imports back exactly") {
  dslaunch::testing::TempDir dir;
  TrainData data;
  data.train_images = MakeSyntheticDigits(64, 1);
  TrainConfig c;
  c.batch.train_batch_size = 16;
  c.batch.micro_batch_per_gpu = 8;
  c.batch.gradient_accumulation_steps = 1;
  c.engine.optimizer.kind = OptimizerKind::kAdamW;  // DeepSpeed's "Adam" (adam_w_mode defaults to true)
  c.model = MlpConfig{{784, 8, 10}};
  c.data.format = DataFormat::kIdx;
  c.train.steps = 2;
  c.steps_per_print = 100;
  c.checkpoint.dir = dir.path() + "/ckpt";
  auto run = Run(2, c, data);
  REQUIRE_MESSAGE(run.ok(), run.status().ToString());

  const std::string out = dir.path() + "/mlp.safetensors";
  REQUIRE(ExportCheckpoint(c.checkpoint.dir, out, DType::kFloat32).ok());
  auto file = SafetensorsFile::Open(out);
  REQUIRE(file.ok());
  std::vector<std::string> names;
  for (const auto& t : file->tensors()) names.push_back(t.name);
  CHECK(names == std::vector<std::string>{"layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"});
  CHECK(file->Find("layers.0.weight")->shape == std::vector<int64_t>{8, 784});
  CHECK(file->Find("layers.1.weight")->shape == std::vector<int64_t>{10, 8});
  const MlpModel model({784, 8, 10}, 1);
  auto imported = ImportParameters(out, model.layout(), "mlp");
  REQUIRE_MESSAGE(imported.ok(), imported.status().ToString());
  CHECK(*imported == MasterFromShards(fs::path(c.checkpoint.dir) / "global_step2"));

  ExportOptions options;
  options.hf_config = true;
  options.n_head = 1;
  auto r = ExportCheckpoint(c.checkpoint.dir, out, options);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("only for the gpt model") != std::string::npos);
}

// ---- Import of files not written by ExportCheckpoint ----------------------------------------

TEST_CASE("ImportParameters reads Hugging Face GPT-2 files: prefixes, ignored buffers, 16-bit tensors") {
  dslaunch::testing::TempDir dir;
  const GptModel model(GptConfig{1, 2, 8, 4, 16}, 1);
  const ParameterLayout& layout = model.layout();
  std::vector<float> flat(layout.numel());
  for (size_t i = 0; i < flat.size(); ++i) flat[i] = static_cast<float>(i % 97) / 8.0f - 6.0f;  // exact in fp16 and bf16

  std::vector<CheckpointParameter> params;
  for (const auto& grp : layout.groups()) {
    for (const auto& t : grp.tensors) params.push_back({t.name, std::vector<int64_t>(t.shape.begin(), t.shape.end()), t.offset, t.numel});
  }
  auto plan = PlanExport("gpt", params);
  REQUIRE(plan.ok());
  // What transformers' save_pretrained of a GPT2LMHeadModel (older versions) holds: prefixed
  // names, the mask buffers, the tied head; fp16.
  std::deque<std::vector<Half>> storage;  // stable addresses
  std::vector<TensorData> tensors;
  auto add = [&](const std::string& name, const std::vector<int64_t>& shape, std::vector<float> values) {
    storage.emplace_back(values.size());
    FloatToHalf(std::span<const float>(values), std::span<Half>(storage.back()));
    tensors.push_back({name, "F16", shape, storage.back().data(), values.size() * 2});
  };
  for (const ExportedTensor& t : *plan) {
    std::vector<float> values(flat.begin() + static_cast<std::ptrdiff_t>(t.offset),
                              flat.begin() + static_cast<std::ptrdiff_t>(t.offset + t.numel));
    if (t.transposed) {
      std::vector<float> hf(values.size());
      const size_t in = static_cast<size_t>(t.shape[0]), out = static_cast<size_t>(t.shape[1]);
      for (size_t o = 0; o < out; ++o) {
        for (size_t i = 0; i < in; ++i) hf[i * out + o] = values[o * in + i];
      }
      values = hf;
    }
    add("transformer." + t.name, t.shape, values);
  }
  add("transformer.h.0.attn.bias", {1, 1, 4, 4}, std::vector<float>(16, 1.0f));
  add("transformer.h.0.attn.masked_bias", {}, {-1e4f});
  add("lm_head.weight", {16, 8}, std::vector<float>(128, 0.5f));
  const std::string path = dir.path() + "/hf.safetensors";
  REQUIRE(WriteSafetensors(path, tensors, {{"format", "pt"}}).ok());
  auto imported = ImportParameters(path, layout, "gpt");
  REQUIRE_MESSAGE(imported.ok(), imported.status().ToString());
  CHECK(*imported == flat);
}

TEST_CASE("ImportParameters names the file and the first missing, misshapen or unknown tensor") {
  dslaunch::testing::TempDir dir;
  const MlpModel model({4, 3, 2}, 1);
  const ParameterLayout& layout = model.layout();
  std::vector<float> w0(12, 1.0f), b0(3, 2.0f), w1(6, 3.0f), b1(2, 4.0f), extra(1, 0.0f);
  struct Case {
    const char* what;
    std::vector<TensorData> tensors;
    std::string message;
  };
  auto t = [](const char* name, std::vector<int64_t> shape, const std::vector<float>& v) {
    return TensorData{name, "F32", std::move(shape), v.data(), v.size() * sizeof(float)};
  };
  const std::vector<Case> cases = {
      {"missing", {t("layers.0.weight", {3, 4}, w0), t("layers.0.bias", {3}, b0), t("layers.1.bias", {2}, b1)},
       "no tensor \"layers.1.weight\""},
      {"shape", {t("layers.0.weight", {4, 3}, w0), t("layers.0.bias", {3}, b0), t("layers.1.weight", {2, 3}, w1), t("layers.1.bias", {2}, b1)},
       "tensor \"layers.0.weight\": expected shape [3, 4], found [4, 3]"},
      {"unknown", {t("layers.0.weight", {3, 4}, w0), t("layers.0.bias", {3}, b0), t("layers.1.weight", {2, 3}, w1), t("layers.1.bias", {2}, b1), t("layers.2.bias", {1}, extra)},
       "tensor \"layers.2.bias\" is not a parameter of this mlp model"},
      {"prefix only for gpt", {t("layers.0.weight", {3, 4}, w0), t("layers.0.bias", {3}, b0), t("layers.1.weight", {2, 3}, w1), t("transformer.layers.1.bias", {2}, b1)},
       "no tensor \"layers.1.bias\""},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    const std::string path = dir.path() + "/bad.safetensors";
    REQUIRE(WriteSafetensors(path, c.tensors, {}).ok());
    auto r = ImportParameters(path, layout, "mlp");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message().find(path + ": ") == 0);
    CHECK(r.status().message().find(c.message) != std::string::npos);
  }
  auto r = ImportParameters(dir.path() + "/absent.safetensors", layout, "mlp");
  CHECK(r.status().code() == StatusCode::kNotFound);
  r = ImportParameters(dir.path() + "/bad.safetensors", layout, "rnn");
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("train.json model.init_from resolves against the config's directory") {
  const std::string base = R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 8,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.001}}, "data": {"train": "train.bin"}, "train": {"steps": 1}, "model": {"type": "gpt", "n_layer": 1, "n_head": 1,
    "n_embd": 8, "block_size": 4)";
  auto no_loader = [](const std::string& p) -> Result<std::string> { return NotFoundError(p); };
  auto c = ParseTrainConfig(base + R"(, "init_from": "init/model.safetensors"}})", "/runs/a/train.json", 1, no_loader);
  REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  CHECK(c->model_init_from == "/runs/a/init/model.safetensors");
  c = ParseTrainConfig(base + R"(, "init_from": "/abs/m.safetensors"}})", "/runs/a/train.json", 1, no_loader);
  REQUIRE(c.ok());
  CHECK(c->model_init_from == "/abs/m.safetensors");
  c = ParseTrainConfig(base + "}}", "/runs/a/train.json", 1, no_loader);
  REQUIRE(c.ok());
  CHECK(c->model_init_from.empty());
  c = ParseTrainConfig(base + R"(, "init_from": ""}})", "/runs/a/train.json", 1, no_loader);
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message().find("$.model.init_from") != std::string::npos);
}

}  // namespace
}  // namespace dslaunch::runtime
