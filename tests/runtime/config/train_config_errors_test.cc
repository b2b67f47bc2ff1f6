// train.json as DeepSpeed reads it (docs/train-json.md, "Errors" and "Unknown keys"): unknown keys
// are warned about and ignored unless they are a likely typo of a known key, the keys of current
// DeepSpeed releases are recognised, a config without an optimizer trains with a named default,
// and every error of a config is reported in one run, in a stable order.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>

#include "runtime/config/train_config.h"
#include "runtime/config/unimplemented_keys.h"
#include "tests/runtime/config/train_json_fixture.h"

namespace dslaunch::runtime {
namespace {

using namespace dslaunch::runtime::testing;

Result<TrainConfig> ParseText(const std::string& text) { return ParseTrainConfig(text, "train.json", 2, NoFiles()); }

constexpr char kIgnored[] =
    ": unknown key, ignored (DeepSpeed ignores keys it does not know; check the spelling if it was meant for "
    "dslaunch-worker)";

TEST_CASE("An unknown key that is no likely typo is ignored with a warning naming its JSON path") {
  json doc = With(BaseConfig(), "/banana", 1);
  doc = With(doc, "/checkpoint/keep", 3);
  doc = With(doc, "/zero_optimization/my_custom_setting", true);
  Result<TrainConfig> c = Parse(doc);
  REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  // In the order the parser visits the sections; the root's own keys last.
  CHECK(c->warnings == std::vector<std::string>{
                           std::string("train.json: $.zero_optimization.my_custom_setting") + kIgnored,
                           std::string("train.json: $.checkpoint.keep") + kIgnored,
                           std::string("train.json: $.banana") + kIgnored,
                       });
  CHECK(c->unimplemented_keys.empty());
  CHECK(c->checkpoint.keep_last == 0);  // ignored: not read as keep_last
}

TEST_CASE("An unknown key a few edits from a known key of the same object stays an error with the suggestion") {
  struct Case {
    const char* pointer;
    const char* message;
  };
  const Case cases[] = {
      {"/zero_optimization/stage3_use_all_reduce_for_fetch_param",
       "train.json: $.zero_optimization.stage3_use_all_reduce_for_fetch_param: unknown key (did you mean "
       "\"stage3_use_all_reduce_for_fetch_params\"?)"},
      {"/torch_autocas", "train.json: $.torch_autocas: unknown key (did you mean \"torch_autocast\"?)"},
      {"/zero_optimization/Stage", "train.json: $.zero_optimization.Stage: unknown key (did you mean \"stage\"?)"},
      {"/train/step", "train.json: $.train.step: unknown key (did you mean \"steps\"?)"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.pointer);
    CHECK(ErrorOf(With(BaseConfig(), c.pointer, 1)) == c.message);
  }
}

TEST_CASE("The keys of current DeepSpeed releases are accepted as not implemented here, each named by its path") {
  json doc = BaseConfig();
  doc["torch_autocast"] = {{"enabled", true}, {"dtype", "bfloat16"}};
  doc["tensor_parallel"] = {{"autotp_size", 1}, {"tp_overlap_comm", true}};
  doc["zero_optimization"] = {{"stage", 1},
                              {"zeropp_loco_param", {{"err_beta", 0.8}, {"reset_T", 1024}}},
                              {"stage3_use_all_reduce_for_fetch_params", true}};
  Result<TrainConfig> c = Parse(doc);
  REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  CHECK(c->warnings.empty());
  CHECK(c->unimplemented_keys == std::vector<std::string>{"$.tensor_parallel.tp_overlap_comm",
                                                          "$.zero_optimization.stage3_use_all_reduce_for_fetch_params",
                                                          "$.zero_optimization.zeropp_loco_param",
                                                          "$.torch_autocast"});
  CHECK(UnimplementedWarning(*c) ==
        "warning: 4 DeepSpeed key(s) not implemented here, ignored: "
        "$.tensor_parallel.tp_overlap_comm, $.zero_optimization.stage3_use_all_reduce_for_fetch_params, "
        "$.zero_optimization.zeropp_loco_param, $.torch_autocast");
  CHECK(c->engine.zero.stage == 1);
}

TEST_CASE("A not-implemented key whose value would change the arithmetic is accepted only at DeepSpeed's default") {
  // At the default: warned as not implemented, like any key of the table.
  json doc = With(BaseConfig(), "/optimizer/params/amsgrad", false);
  doc = With(doc, "/gradient_predivide_factor", 1);  // 1 and 1.0 are the same number
  Result<TrainConfig> c = Parse(doc);
  REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  CHECK(c->unimplemented_keys ==
        std::vector<std::string>{"$.optimizer.params.amsgrad", "$.gradient_predivide_factor"});
  // Elsewhere: an error each, in the one report.
  doc = With(BaseConfig(), "/optimizer/params/amsgrad", true);
  doc = With(doc, "/zero_optimization/zero_quantized_gradients", true);
  CHECK(ErrorOf(doc) ==
        "2 errors in the configuration:\n"
        "  train.json: $.optimizer.params.amsgrad: not implemented here, and true would change the training; "
        "remove the key or give DeepSpeed's default, false\n"
        "  train.json: $.zero_optimization.zero_quantized_gradients: not implemented here, and true would change "
        "the training; remove the key or give DeepSpeed's default, false");
}

TEST_CASE("A config without an optimizer section trains with AdamW at DeepSpeed's defaults, said in one line") {
  json doc = BaseConfig();
  doc.erase("optimizer");
  Result<TrainConfig> c = Parse(doc);
  REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  CHECK(c->default_optimizer);
  const OptimizerParams& o = c->engine.optimizer;
  CHECK(o.kind == OptimizerKind::kAdamW);
  CHECK(o.lr == 1e-3);
  CHECK(o.beta1 == 0.9);
  CHECK(o.beta2 == 0.999);
  CHECK(o.eps == 1e-8);
  CHECK(o.weight_decay == 0.0);
  CHECK(o.bias_correction);
  CHECK(DefaultOptimizerNote(*c) ==
        "optimizer: no \"optimizer\" section; training with AdamW (lr 0.001, betas [0.9, 0.999], eps 1e-08, "
        "weight_decay 0), DeepSpeed's defaults for {\"type\": \"AdamW\"}");

  Result<TrainConfig> given = Parse(BaseConfig());
  REQUIRE(given.ok());
  CHECK_FALSE(given->default_optimizer);
  CHECK(DefaultOptimizerNote(*given).empty());
}

constexpr char kSixErrors[] =
    "6 errors in the configuration:\n"
    "  train.json: $.fp16.loss_scale_windw: unknown key (did you mean \"loss_scale_window\"?)\n"
    "  train.json: $.model.n_layer: expected an integer 1-4096, got 0\n"
    "  train.json: $.optimizer.params.lr: expected a number >= 0.0, got \"fast\"\n"
    "  train.json: $.train.steps: expected an integer >= 1, got -1\n"
    "  train.json: $.train_batch_sise: unknown key (did you mean \"train_batch_size\"?)\n"
    "  train.json: $.zero_optimization.stage: expected an integer 0-3, got \"two\"";

TEST_CASE("Every error of a config is reported in one run, each with its JSON path, sorted by path") {
  json doc = With(BaseConfig(), "/zero_optimization/stage", "two");
  doc = With(doc, "/optimizer/params/lr", "fast");
  doc = With(doc, "/model/n_layer", 0);
  doc = With(doc, "/train/steps", -1);
  doc = With(doc, "/fp16/loss_scale_windw", 10);
  doc = With(doc, "/train_batch_sise", 8);
  CHECK(ErrorOf(doc) == kSixErrors);

  // The same faults written in another order give the same message.
  Result<TrainConfig> reordered = ParseText(R"({
    "train_batch_sise": 8, "fp16": {"loss_scale_windw": 10}, "train": {"steps": -1},
    "zero_optimization": {"stage": "two"},
    "data": {"train": "data/train.bin"},
    "model": {"block_size": 16, "n_embd": 32, "n_head": 2, "n_layer": 0, "type": "gpt"},
    "optimizer": {"params": {"lr": "fast"}, "type": "AdamW"},
    "train_micro_batch_size_per_gpu": 4
  })");
  REQUIRE_FALSE(reordered.ok());
  CHECK(reordered.status().message() == kSixErrors);
}

TEST_CASE("A wrong value that other keys depend on is reported alone, not with errors it would cause") {
  // A wrong model type: the model's other keys, the data format and seq_len are not checked
  // against a model that is not known.
  json wrong_model = With(BaseConfig(), "/model/type", "gtp");
  wrong_model = With(wrong_model, "/data/seq_len", 8);
  CHECK(ErrorOf(wrong_model) ==
        "train.json: $.model.type: expected one of gpt, mlp, got \"gtp\" (did you mean \"gpt\"?)");
  // A wrong stage: offload_param (stage 3 only) is not refused for a stage that is not known.
  json offload = With(BaseConfig(), "/zero_optimization/stage", 5);
  offload = With(offload, "/zero_optimization/offload_param", {{"device", "nvme"}, {"nvme_path", "swap"}});
  CHECK(ErrorOf(offload) == "train.json: $.zero_optimization.stage: expected an integer 0-3, got 5");
  // A wrong optimizer type: its params are not read (their keys depend on the type).
  json sgd_params = With(BaseConfig(), "/optimizer/type", "Lamb");
  sgd_params = With(sgd_params, "/optimizer/params/momentum", 0.9);
  CHECK(ErrorOf(sgd_params) == "train.json: $.optimizer.type: expected one of Adam, AdamW, SGD, got \"Lamb\"");
  // A wrong batch key: the batch rule is not applied to what is left.
  CHECK(ErrorOf(With(BaseConfig(), "/train_micro_batch_size_per_gpu", "four")) ==
        "train.json: $.train_micro_batch_size_per_gpu: expected an integer 1-1048576, got \"four\"");
}

TEST_CASE("Missing required keys of several sections are reported together") {
  json doc = BaseConfig();
  doc["model"].erase("n_head");
  doc["model"].erase("block_size");
  doc["train"].erase("steps");
  CHECK(ErrorOf(doc) ==
        "3 errors in the configuration:\n"
        "  train.json: $.model.block_size: required\n"
        "  train.json: $.model.n_head: required\n"
        "  train.json: $.train.steps: required");
}

TEST_CASE("Errors from a referenced DeepSpeed config and from train.json are listed together, sorted by file") {
  const std::map<std::string, std::string> files = {
      {"ds.json", R"({"zero_optimization": {"stage": 7}, "gradient_clipping": "1.0"})"}};
  json doc = With(BaseConfig(), "/deepspeed_config", "ds.json");
  doc = With(doc, "/optimizer/params/lr", -1);
  Result<TrainConfig> r = ParseTrainConfig(doc.dump(), "train.json", 2, [&](const std::string& path) -> Result<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return NotFoundError(path + ": no such file");
    return it->second;
  });
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() ==
        "3 errors in the configuration:\n"
        "  ds.json: $.gradient_clipping: expected a number >= 0.0, got \"1.0\"\n"
        "  ds.json: $.zero_optimization.stage: expected an integer 0-3, got 7\n"
        "  train.json: $.optimizer.params.lr: expected a number >= 0.0, got -1");
}

TEST_CASE("docs/train-json.md lists every DeepSpeed key of the not-implemented table") {
  std::ifstream in(std::string(DSLAUNCH_SOURCE_DIR) + "/docs/train-json.md");
  REQUIRE(in.good());
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t begin = doc.find("### Recognised, not implemented");
  REQUIRE(begin != std::string::npos);
  const std::string list = doc.substr(begin, doc.find("\n## ", begin) - begin);
  for (const internal::UnimplementedKey& entry : internal::UnimplementedKeys()) {
    CAPTURE(entry.section);
    CAPTURE(entry.key);
    CHECK(list.find("`" + std::string(entry.key) + "`") != std::string::npos);
  }
}

}  // namespace
}  // namespace dslaunch::runtime
