// ParseTrainConfig and the batch rule (docs/train-json.md).
#include "runtime/config/train_config.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/runtime/config/train_json_fixture.h"

namespace dslaunch::runtime {
namespace {

using namespace dslaunch::runtime::testing;

ConfigLoader FakeFiles(std::map<std::string, std::string> files) {
  return [files](const std::string& path) -> Result<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return NotFoundError(path + ": no such file");
    return it->second;
  };
}

json Without(json doc, const std::string& key) {
  doc.erase(key);
  return doc;
}

TEST_CASE("ResolveBatchSizes infers the missing sizes as DeepSpeed does") {
  struct Case {
    std::optional<int64_t> batch, micro, accumulation;
    int world;
    int64_t want_batch, want_micro, want_accumulation;
  };
  const Case cases[] = {
      {32, 4, 4, 2, 32, 4, 4},                       // all given and consistent
      {32, 4, std::nullopt, 2, 32, 4, 4},            // accumulation inferred
      {32, std::nullopt, 4, 2, 32, 4, 4},            // micro inferred
      {std::nullopt, 4, 4, 2, 32, 4, 4},             // batch inferred
      {32, std::nullopt, std::nullopt, 2, 32, 16, 1},  // accumulation 1, micro inferred
      {std::nullopt, 4, std::nullopt, 2, 8, 4, 1},   // accumulation 1, batch inferred
      {8, 8, std::nullopt, 1, 8, 8, 1},
  };
  for (const Case& c : cases) {
    CAPTURE(c.batch.value_or(-1));
    CAPTURE(c.micro.value_or(-1));
    CAPTURE(c.accumulation.value_or(-1));
    CAPTURE(c.world);
    Result<BatchConfig> b = ResolveBatchSizes(c.batch, c.micro, c.accumulation, c.world);
    REQUIRE(b.ok());
    CHECK(b->train_batch_size == c.want_batch);
    CHECK(b->micro_batch_per_gpu == c.want_micro);
    CHECK(b->gradient_accumulation_steps == c.want_accumulation);
  }
}

TEST_CASE("ResolveBatchSizes shows the arithmetic of an inconsistency") {
  struct Case {
    std::optional<int64_t> batch, micro, accumulation;
    int world;
    const char* message;
  };
  const Case cases[] = {
      {32, 4, 2, 2, "train_batch_size 32 != micro 4 x accumulation 2 x world 2 = 16"},
      {30, 4, std::nullopt, 2, "train_batch_size 30 is not a multiple of micro 4 x world 2 = 8"},
      {4, 4, std::nullopt, 2, "train_batch_size 4 is not a multiple of micro 4 x world 2 = 8"},
      {30, std::nullopt, 4, 2, "train_batch_size 30 is not a multiple of accumulation 4 x world 2 = 8"},
      {3, std::nullopt, std::nullopt, 2, "train_batch_size 3 is not a multiple of accumulation 1 x world 2 = 2"},
      {std::nullopt, std::nullopt, 4, 2, "set train_batch_size or train_micro_batch_size_per_gpu (or both)"},
      {std::nullopt, std::nullopt, std::nullopt, 2,
       "set train_batch_size or train_micro_batch_size_per_gpu (or both)"},
      {8, 4, 1, 0, "world size 0 < 1"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.message);
    Result<BatchConfig> b = ResolveBatchSizes(c.batch, c.micro, c.accumulation, c.world);
    REQUIRE_FALSE(b.ok());
    CHECK(b.status().code() == StatusCode::kInvalidArgument);
    CHECK(b.status().message() == c.message);
  }
}

TEST_CASE("ParseTrainConfig reports a batch inconsistency with the file and key") {
  json doc = With(With(BaseConfig(), "/train_batch_size", 32), "/gradient_accumulation_steps", 2);
  CHECK(ErrorOf(doc) == "train.json: $.train_batch_size: train_batch_size 32 != micro 4 x accumulation 2 x "
                        "world 2 = 16; it fits world size 4");
}

TEST_CASE("ParseTrainConfig fills DeepSpeed's defaults") {
  Result<TrainConfig> r = Parse(BaseConfig());
  REQUIRE(r.ok());
  const TrainConfig& c = *r;
  CHECK(c.batch.train_batch_size == 8);
  CHECK(c.engine.optimizer.kind == OptimizerKind::kAdamW);
  CHECK(c.engine.optimizer.lr == doctest::Approx(3e-4));
  CHECK(c.engine.optimizer.beta1 == 0.9);
  CHECK(c.engine.optimizer.beta2 == 0.999);
  CHECK(c.engine.optimizer.eps == 1e-8);
  CHECK(c.engine.optimizer.weight_decay == 0.0);
  CHECK(c.engine.optimizer.bias_correction);
  CHECK(c.engine.schedule.kind == LrScheduleKind::kConstant);
  CHECK(c.engine.gradient_clipping == 0.0);
  CHECK(c.engine.loss_scaler.loss_scale == 0.0);
  CHECK(c.engine.loss_scaler.initial_scale_power == 16);
  CHECK(c.engine.loss_scaler.loss_scale_window == 1000);
  CHECK(c.engine.loss_scaler.hysteresis == 2);
  CHECK(c.engine.loss_scaler.min_loss_scale == 1.0);
  CHECK(c.engine.precision == Precision::kFp32);
  CHECK(c.engine.zero.stage == 0);
  CHECK(c.engine.zero.reduce_bucket_size == 500'000'000);
  CHECK(c.engine.zero.allgather_bucket_size == 500'000'000);
  CHECK_FALSE(c.engine.zero.overlap_comm);
  CHECK(c.engine.zero.contiguous_gradients);
  CHECK(c.engine.zero.stage3_prefetch_bucket_size == 50'000'000);
  CHECK(c.engine.zero.stage3_param_persistence_threshold == 100'000);
  CHECK(c.engine.zero.stage3_max_live_parameters == 1'000'000'000);
  CHECK(c.steps_per_print == 10);
  CHECK(c.seed == 42);
  const auto& gpt = std::get<GptConfig>(c.model);
  CHECK(gpt.vocab_size == 256);
  CHECK(c.data.format == DataFormat::kTokens);
  CHECK(c.data.train == "data/train.bin");  // "train.json" has no directory part
  CHECK(c.data.seq_len == 16);
  CHECK(c.train.steps == 10);
  CHECK(c.train.eval_interval == 0);
  CHECK(c.train.eval_steps == 20);
  CHECK(c.checkpoint.dir.empty());
  CHECK(c.checkpoint.load == CheckpointLoad::kNone);
  CHECK(c.checkpoint.save_on_stop);
  CHECK(c.unimplemented_keys.empty());
  CHECK(UnimplementedWarning(c).empty());
}

TEST_CASE("ParseTrainConfig reads every section") {
  json doc = BaseConfig();
  doc["optimizer"] = {{"type", "sgd"}, {"params", {{"lr", 0.1}, {"momentum", 0.9}, {"nesterov", true}}}};
  doc["scheduler"] = {{"type", "WarmupDecayLR"},
                      {"params", {{"warmup_min_lr", 0}, {"warmup_max_lr", 0.1}, {"warmup_num_steps", 5},
                                  {"warmup_type", "linear"}, {"total_num_steps", 100}}}};
  doc["fp16"] = {{"enabled", true}, {"loss_scale", 128}, {"hysteresis", 4}};
  doc["zero_optimization"] = {{"stage", 3}, {"reduce_bucket_size", 5e8}, {"stage3_max_live_parameters", 1e7}};
  doc["gradient_clipping"] = 1.0;
  doc["seed"] = 7;
  doc["steps_per_print"] = 5;
  doc["checkpoint"] = {{"dir", "ckpt"}, {"interval", 50}, {"keep_last", 2}, {"load", "latest"}, {"async", true}};
  Result<TrainConfig> r = ParseTrainConfig(doc.dump(), "runs/a/train.json", 2, NoFiles());
  REQUIRE(r.ok());
  CHECK(r->engine.optimizer.kind == OptimizerKind::kSgd);
  CHECK(r->engine.optimizer.lr == 0.1);
  CHECK(r->engine.optimizer.momentum == 0.9);
  CHECK(r->engine.optimizer.nesterov);
  CHECK(r->engine.schedule.kind == LrScheduleKind::kWarmupDecayLr);
  CHECK(r->engine.schedule.warmup_max_lr == 0.1);
  CHECK(r->engine.schedule.warmup_num_steps == 5);
  CHECK(r->engine.schedule.warmup_type == WarmupType::kLinear);
  CHECK(r->engine.schedule.total_num_steps == 100);
  CHECK(r->engine.precision == Precision::kFp16);
  CHECK(r->engine.loss_scaler.loss_scale == 128);
  CHECK(r->engine.loss_scaler.hysteresis == 4);
  CHECK(r->engine.zero.stage == 3);
  CHECK(r->engine.zero.overlap_comm);  // DeepSpeed's stage-3 default
  CHECK(r->engine.zero.reduce_bucket_size == 500'000'000);
  CHECK(r->engine.zero.stage3_max_live_parameters == 10'000'000);
  CHECK(r->engine.gradient_clipping == 1.0);
  CHECK(r->seed == 7);
  CHECK(r->steps_per_print == 5);
  CHECK(r->data.train == "runs/a/data/train.bin");
  CHECK(r->checkpoint.dir == "runs/a/ckpt");
  CHECK(r->checkpoint.load == CheckpointLoad::kLatest);
  CHECK(r->checkpoint.async);
  CHECK(r->checkpoint.keep_last == 2);
}

TEST_CASE("ParseTrainConfig matches optimizer names case-insensitively and honours adam_w_mode") {
  for (const char* name : {"adam", "ADAM", "Adam"}) {
    CAPTURE(name);
    Result<TrainConfig> r = Parse(With(BaseConfig(), "/optimizer/type", name));
    REQUIRE(r.ok());
    CHECK(r->engine.optimizer.kind == OptimizerKind::kAdamW);  // DeepSpeed's Adam defaults to adam_w_mode
  }
  Result<TrainConfig> l2 =
      Parse(With(With(BaseConfig(), "/optimizer/type", "Adam"), "/optimizer/params/adam_w_mode", false));
  REQUIRE(l2.ok());
  CHECK(l2->engine.optimizer.kind == OptimizerKind::kAdam);
}

TEST_CASE("ParseTrainConfig accepts warmup_num_steps 0 as DeepSpeed does: a two-step warm-up") {
  // DeepSpeed's schedulers take max(2, warmup_num_steps); the validator (ValidateLrSchedule) and
  // the parser agree on accepting 0 (docs/train-json.md).
  for (const char* type : {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR"}) {
    CAPTURE(type);
    json doc = BaseConfig();
    doc["scheduler"] = {{"type", type}, {"params", {{"warmup_num_steps", 0}, {"total_num_steps", 10}}}};
    if (std::string(type) == "WarmupLR") doc["scheduler"]["params"].erase("total_num_steps");
    Result<TrainConfig> r = Parse(doc);
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    CHECK(r->engine.schedule.warmup_num_steps == 0);
    CHECK(ValidateLrSchedule(r->engine.schedule).ok());
    // Log warm-up over 2 steps: the start of the range at iteration 0, the peak from iteration 1.
    const double peak = std::string(type) == "WarmupCosineLR" ? 3e-4 : 1e-3;
    CHECK(LearningRate(r->engine.schedule, r->engine.optimizer.lr, 0) == 0.0);
    CHECK(LearningRate(r->engine.schedule, r->engine.optimizer.lr, 1) == doctest::Approx(peak));
  }
  CHECK(ErrorOf(With(BaseConfig(), "/scheduler", json{{"type", "WarmupLR"}, {"params", {{"warmup_num_steps", -1}}}})) ==
        "train.json: $.scheduler.params.warmup_num_steps: expected an integer >= 0, got -1");
}

TEST_CASE("ParseTrainConfig reports wrong types and values with their JSON path") {
  struct Case {
    const char* pointer;
    json value;
    const char* message;
  };
  const Case cases[] = {
      {"/zero_optimization/stage", "two", "train.json: $.zero_optimization.stage: expected an integer 0-3, got \"two\""},
      {"/zero_optimization/stage", 4, "train.json: $.zero_optimization.stage: expected an integer 0-3, got 4"},
      {"/zero_optimization/overlap_comm", "yes", "train.json: $.zero_optimization.overlap_comm: expected true or false, got \"yes\""},
      {"/zero_optimization/reduce_bucket_size", 0.5, "train.json: $.zero_optimization.reduce_bucket_size: expected an integer >= 1 or \"auto\", got 0.5"},
      {"/zero_optimization", 2, "train.json: $.zero_optimization: expected an object, got 2"},
      {"/train_micro_batch_size_per_gpu", 0, "train.json: $.train_micro_batch_size_per_gpu: expected an integer 1-1048576, got 0"},
      {"/optimizer/type", "Lamb", "train.json: $.optimizer.type: expected one of Adam, AdamW, SGD, got \"Lamb\""},
      {"/optimizer/type", "SDG", "train.json: $.optimizer.type: expected one of Adam, AdamW, SGD, got \"SDG\" (did you mean \"SGD\"?)"},
      {"/optimizer/params/lr", "fast", "train.json: $.optimizer.params.lr: expected a number >= 0.0, got \"fast\""},
      {"/optimizer/params/betas", json::array({0.9}), "train.json: $.optimizer.params.betas: expected an array of 2 numbers, got [0.9]"},
      {"/optimizer/params/betas", json::array({0.9, 2}), "train.json: $.optimizer.params.betas[1]: expected a number >= 0.0 and < 1.0, got 2 (PyTorch's Adam refuses it too); the usual values are [0.9, 0.999]"},
      // PyTorch's rule: each beta in [0, 1). Before: 1.0 was taken and the run later "diverged".
      {"/optimizer/params/betas", json::array({0.9, 1.0}), "train.json: $.optimizer.params.betas[1]: expected a number >= 0.0 and < 1.0, got 1.0 (PyTorch's Adam refuses it too); the usual values are [0.9, 0.999]"},
      {"/optimizer/params/betas", json::array({1, 0.999}), "train.json: $.optimizer.params.betas[0]: expected a number >= 0.0 and < 1.0, got 1 (PyTorch's Adam refuses it too); the usual values are [0.9, 0.999]"},
      {"/optimizer/params/betas", json::array({0.9, -0.5}), "train.json: $.optimizer.params.betas[1]: expected a number >= 0.0 and < 1.0, got -0.5 (PyTorch's Adam refuses it too); the usual values are [0.9, 0.999]"},
      {"/optimizer/params/betas", json::array({0.9, "x"}), "train.json: $.optimizer.params.betas[1]: expected a number >= 0.0 and < 1.0, got \"x\""},
      {"/scheduler", json{{"type", "OneCycle"}}, "train.json: $.scheduler.type: expected one of WarmupLR, WarmupDecayLR, WarmupCosineLR, got \"OneCycle\""},
      {"/scheduler", json{{"type", "WarmupCosineLR"}}, "train.json: $.scheduler.params: required: total_num_steps has no default"},
      {"/scheduler", json{{"type", "WarmupCosineLR"}, {"params", {{"total_num_steps", 10}, {"warmup_num_steps", 20}}}}, "train.json: $.scheduler.params.warmup_num_steps: 20 > total_num_steps 10"},
      {"/scheduler", json{{"type", "WarmupLR"}, {"params", {{"warmup_type", "cosine"}}}}, "train.json: $.scheduler.params.warmup_type: expected one of log, linear, got \"cosine\""},
      {"/fp16/enabled", 1, "train.json: $.fp16.enabled: expected true or false, got 1"},
      {"/fp16/initial_scale_power", 100, "train.json: $.fp16.initial_scale_power: expected an integer 0-64, got 100"},
      {"/fp16/hysteresis", 0, "train.json: $.fp16.hysteresis: expected an integer >= 1, got 0"},
      // Checks made by the validator next to the component's type, named by their JSON path.
      {"/fp16/min_loss_scale", 0, "train.json: $.fp16.min_loss_scale: must be > 0"},
      {"/optimizer", json{{"type", "SGD"}, {"params", {{"lr", 0.1}, {"nesterov", true}}}},
       "train.json: $.optimizer.params.nesterov: requires momentum > 0 and dampening 0"},
      {"/model/type", "rnn", "train.json: $.model.type: expected one of gpt, mlp, got \"rnn\""},
      {"/model/n_head", 3, "train.json: $.model.n_embd: 32 is not divisible by n_head 3"},
      {"/model/vocab_size", 70000, "train.json: $.model.vocab_size: expected an integer 1-65536, got 70000"},
      {"/data/train", 5, "train.json: $.data.train: expected a string, got 5"},
      {"/data/seq_len", 17, "train.json: $.data.seq_len: expected an integer 1-16, got 17"},
      {"/train/steps", -1, "train.json: $.train.steps: expected an integer >= 1, got -1"},
      {"/checkpoint", json{{"load", "latest"}}, "train.json: $.checkpoint.load: \"latest\" needs \"dir\""},
      {"/checkpoint", json{{"interval", 10}}, "train.json: $.checkpoint.interval: needs \"dir\""},
      {"/seed", -3, "train.json: $.seed: expected an integer >= 0, got -3"},
      {"/gradient_clipping", "1", "train.json: $.gradient_clipping: expected a number >= 0.0, got \"1\""},
      {"/deepspeed_config", 3, "train.json: $.deepspeed_config: expected a file name, got 3"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.pointer);
    CHECK(ErrorOf(With(BaseConfig(), c.pointer, c.value)) == c.message);
  }
}

TEST_CASE("ParseTrainConfig reports missing required keys") {
  CHECK(ErrorOf(Without(BaseConfig(), "model")) == "train.json: $.model: required");
  CHECK(ErrorOf(Without(BaseConfig(), "data")) == "train.json: $.data: required");
  CHECK(ErrorOf(Without(BaseConfig(), "train")) == "train.json: $.train: required (at least \"steps\")");
  json no_layers = BaseConfig();
  no_layers["model"].erase("n_layer");
  CHECK(ErrorOf(no_layers) == "train.json: $.model.n_layer: required");
}

TEST_CASE("ParseTrainConfig rejects fp16 and bf16 together") {
  json doc = With(With(BaseConfig(), "/fp16/enabled", true), "/bf16/enabled", true);
  CHECK(ErrorOf(doc) == "train.json: $.bf16.enabled: fp16.enabled is true too; enable at most one of fp16 and bf16");
  Result<TrainConfig> bf16 = Parse(With(BaseConfig(), "/bf16/enabled", true));
  REQUIRE(bf16.ok());
  CHECK(bf16->engine.precision == Precision::kBf16);
}

TEST_CASE("ParseTrainConfig rejects an unknown key that is a likely typo of a known one, with the suggestion") {
  struct Case {
    const char* pointer;
    const char* message;
  };
  const Case cases[] = {
      {"/train_batch_sise", "train.json: $.train_batch_sise: unknown key (did you mean \"train_batch_size\"?)"},
      {"/zero_optimization/stgae", "train.json: $.zero_optimization.stgae: unknown key (did you mean \"stage\"?)"},
      {"/optimizer/params/weight_decey", "train.json: $.optimizer.params.weight_decey: unknown key (did you mean \"weight_decay\"?)"},
      {"/fp16/loss_scale_windows", "train.json: $.fp16.loss_scale_windows: unknown key (did you mean \"loss_scale_window\"?)"},
      {"/model/n_embed", "train.json: $.model.n_embed: unknown key (did you mean \"n_embd\"?)"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.pointer);
    CHECK(ErrorOf(With(BaseConfig(), c.pointer, 1)) == c.message);
  }
}

TEST_CASE("ParseTrainConfig collects DeepSpeed keys it does not implement") {
  json doc = BaseConfig();
  doc["memory_breakdown"] = true;
  doc["wall_clock_breakdown"] = false;
  doc["flops_profiler"] = {{"enabled", false}};
  doc["zero_optimization"] = {{"stage", 2}, {"round_robin_gradients", true}};
  doc["fp16"] = {{"enabled", false}, {"auto_cast", false}};
  Result<TrainConfig> r = Parse(doc);
  REQUIRE(r.ok());
  std::vector<std::string> keys = r->unimplemented_keys;
  std::sort(keys.begin(), keys.end());
  CHECK(keys == std::vector<std::string>{"$.flops_profiler", "$.fp16.auto_cast", "$.memory_breakdown",
                                         "$.wall_clock_breakdown", "$.zero_optimization.round_robin_gradients"});
  std::string warning = UnimplementedWarning(*r);
  CHECK(warning.find("5 DeepSpeed key(s)") != std::string::npos);
  CHECK(warning.find("$.zero_optimization.round_robin_gradients") != std::string::npos);
}

TEST_CASE("ParseTrainConfig reports JSON syntax errors with the file name") {
  Result<TrainConfig> r = ParseTrainConfig("{\"seed\": }", "x/train.json", 1, NoFiles());
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().rfind("x/train.json: parse error at line 1", 0) == 0);
  Result<TrainConfig> array = ParseTrainConfig("[1]", "train.json", 1, NoFiles());
  CHECK(array.status().message() == "train.json: $: expected a JSON object, got [1]");
}

TEST_CASE("ParseTrainConfig resolves deepspeed_config through the loader, inline keys overriding") {
  json doc = BaseConfig();
  doc.erase("train_micro_batch_size_per_gpu");
  doc.erase("optimizer");
  doc["deepspeed_config"] = "ds_config.json";
  doc["zero_optimization"] = {{"stage", 2}};
  std::string ds = R"({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2,
    "optimizer": {"type": "Adam", "params": {"lr": 0.001}},
    "zero_optimization": {"stage": 1, "overlap_comm": true}, "wall_clock_breakdown": false})";
  ConfigLoader loader = FakeFiles({{"runs/ds_config.json", ds}});
  Result<TrainConfig> r = ParseTrainConfig(doc.dump(), "runs/train.json", 2, loader);
  REQUIRE(r.ok());
  CHECK(r->deepspeed_config_path == "runs/ds_config.json");
  CHECK(r->batch.gradient_accumulation_steps == 4);
  CHECK(r->engine.optimizer.kind == OptimizerKind::kAdamW);  // "Adam", from the referenced file
  CHECK(r->engine.optimizer.lr == 0.001);
  CHECK(r->engine.zero.stage == 2);         // inline wins
  CHECK(r->engine.zero.overlap_comm);       // merged from the referenced file
  CHECK(r->unimplemented_keys == std::vector<std::string>{"$.wall_clock_breakdown"});

  SUBCASE("errors name the file the key came from") {
    ConfigLoader bad = FakeFiles({{"runs/ds_config.json", R"({"train_batch_size": 16, "optimizer": {"type": "SGD"}, "fp16": {"enabled": "no"}})"}});
    Result<TrainConfig> e = ParseTrainConfig(doc.dump(), "runs/train.json", 2, bad);
    CHECK(e.status().message() == "runs/ds_config.json: $.fp16.enabled: expected true or false, got \"no\"");
  }
  SUBCASE("a validator's error names the file the key came from") {
    ConfigLoader bad = FakeFiles({{"runs/ds_config.json", R"({"train_batch_size": 16, "optimizer": {"type": "SGD"},
      "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 20, "total_num_steps": 10}}})"}});
    Result<TrainConfig> e = ParseTrainConfig(doc.dump(), "runs/train.json", 2, bad);
    CHECK(e.status().message() == "runs/ds_config.json: $.scheduler.params.warmup_num_steps: 20 > total_num_steps 10");
  }
  SUBCASE("a missing file is the loader's error with context") {
    Result<TrainConfig> e = ParseTrainConfig(doc.dump(), "runs/train.json", 2, NoFiles());
    CHECK(e.status().code() == StatusCode::kNotFound);
    CHECK(e.status().message() == "runs/train.json: $.deepspeed_config: runs/ds_config.json: no such file");
  }
  SUBCASE("a referenced config cannot reference another") {
    ConfigLoader nested = FakeFiles({{"runs/ds_config.json", R"({"deepspeed_config": "other.json"})"}});
    Result<TrainConfig> e = ParseTrainConfig(doc.dump(), "runs/train.json", 2, nested);
    CHECK(e.status().message() ==
          "runs/ds_config.json: $.deepspeed_config: a referenced config cannot reference another");
  }
}

TEST_CASE("ParseTrainConfig parses every example in configs/") {
  const std::filesystem::path dir = std::filesystem::path(DSLAUNCH_SOURCE_DIR) / "configs";
  int parsed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    CAPTURE(entry.path().string());
    for (int world : {1, 2}) {
      Result<TrainConfig> r = ReadTrainConfig(entry.path().string(), world);
      CHECK_MESSAGE(r.ok(), r.status().ToString());
    }
    ++parsed;
  }
  CHECK(parsed >= 3);
}

TEST_CASE("ParseTrainConfig reads the mlp model and idx data") {
  json doc = BaseConfig();
  doc["model"] = {{"type", "mlp"}, {"layers", {784, 300, 10}}};
  doc["data"] = {{"format", "idx"}, {"train", "t-images"}, {"train_labels", "t-labels"}};
  Result<TrainConfig> r = Parse(doc);
  REQUIRE(r.ok());
  CHECK(std::get<MlpConfig>(r->model).widths == std::vector<int>{784, 300, 10});
  CHECK(r->data.format == DataFormat::kIdx);
  CHECK(r->data.seq_len == 0);
  CHECK(ErrorOf(With(doc, "/model/layers", json::array({784}))) ==
        "train.json: $.model.layers: needs at least 2 widths (input and output)");
  CHECK(ErrorOf(With(doc, "/model/layers", json::array({784, 0}))) ==
        "train.json: $.model.layers[1]: expected an integer 1-1048576, got 0");
  CHECK(ErrorOf(With(doc, "/train/sample_tokens", 5)) ==
        "train.json: $.train.sample_tokens: only the gpt model generates text");
}

}  // namespace
}  // namespace dslaunch::runtime
