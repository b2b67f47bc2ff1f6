// train.json as real-world DeepSpeed configs write it (docs/train-json.md, "DeepSpeed
// compatibility"): duplicate keys refused as DeepSpeed refuses them, the old boolean
// zero_optimization, the Hugging Face Trainer's "auto" reported all at once, and the warnings.
#include "runtime/config/train_config.h"

#include <doctest/doctest.h>

#include <map>
#include <string>

namespace dslaunch::runtime {
namespace {

// A minimal valid train.json without the key a case adds, written as text so that a case can
// hold what a JSON library cannot (two equal keys).
std::string Base(const std::string& extra) {
  return R"({
  "train_micro_batch_size_per_gpu": 4,
  "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
  "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 16},
  "data": {"train": "data/train.bin"},
  "train": {"steps": 10})" +
         extra + "\n}";
}

ConfigLoader Files(std::map<std::string, std::string> files) {
  return [files](const std::string& path) -> Result<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return NotFoundError(path + ": no such file");
    return it->second;
  };
}

Result<TrainConfig> Parse(const std::string& text, const ConfigLoader& loader = Files({})) {
  return ParseTrainConfig(text, "train.json", 2, loader);
}

std::string ErrorOf(const std::string& text, const ConfigLoader& loader = Files({})) {
  Result<TrainConfig> r = Parse(text, loader);
  if (r.ok()) return "OK";
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  return r.status().message();
}

TEST_CASE("A duplicate key is refused with its JSON path and both places, as DeepSpeed refuses it") {
  // Before: nlohmann_json kept the last value silently (stage 2 here).
  CHECK(ErrorOf(Base(",\n  \"zero_optimization\": {\"stage\": 1,\n    \"stage\": 2}")) ==
        "train.json: $.zero_optimization.stage: duplicate key at line 8, column 5, first at line 7, column 25; "
        "keep one of them");
  CHECK(ErrorOf(Base(",\n  \"train_micro_batch_size_per_gpu\": 8")) ==
        "train.json: $.train_micro_batch_size_per_gpu: duplicate key at line 7, column 3, first at line 2, "
        "column 3; keep one of them");
  // In an object inside an array, and written with an escape: the same key once decoded.
  CHECK(ErrorOf(Base(",\n  \"x\": [1, {\"a\": 1, \"\\u0061\": 2}]")) ==
        "train.json: $.x[1].a: duplicate key at line 7, column 21, first at line 7, column 13; keep one of them");
  // Equal keys in different objects are not duplicates.
  CHECK(ErrorOf(Base(",\n  \"fp16\": {\"enabled\": false}, \"bf16\": {\"enabled\": false}")) == "OK");
  // In a referenced DeepSpeed config, named by its file.
  const ConfigLoader ds = Files({{"ds.json", "{\"train_batch_size\": 8,\n \"train_batch_size\": 16}"}});
  CHECK(ErrorOf(Base(",\n  \"deepspeed_config\": \"ds.json\""), ds) ==
        "ds.json: $.train_batch_size: duplicate key at line 2, column 2, first at line 1, column 2; keep one of "
        "them");
  // A syntax error comes first: where the text is not JSON, "duplicates" mean nothing.
  CHECK(ErrorOf("{\"a\": 1, \"a\": }").rfind("train.json: parse error at line 1", 0) == 0);
}

TEST_CASE("The boolean zero_optimization is read as DeepSpeed reads it, with a warning") {
  // Before: "$.zero_optimization: expected an object, got true".
  Result<TrainConfig> on = Parse(Base(",\n  \"zero_optimization\": true"));
  REQUIRE_MESSAGE(on.ok(), on.status().ToString());
  CHECK(on->engine.zero.stage == 1);
  CHECK(on->engine.zero.allgather_bucket_size == 500'000'000);
  CHECK(on->warnings == std::vector<std::string>{
                            "train.json: $.zero_optimization: the boolean form is deprecated (DeepSpeed reads true "
                            "as stage 1); write {\"stage\": 1}"});
  Result<TrainConfig> off = Parse(Base(",\n  \"zero_optimization\": false"));
  REQUIRE(off.ok());
  CHECK(off->engine.zero.stage == 0);
  CHECK(off->warnings.size() == 1);
  // The old form's all-gather size, top level.
  Result<TrainConfig> sized = Parse(Base(",\n  \"zero_optimization\": true, \"allgather_size\": 2e8"));
  REQUIRE(sized.ok());
  CHECK(sized->engine.zero.allgather_bucket_size == 200'000'000);
  // Beside the object form DeepSpeed does not read it: an unknown key, ignored with a warning.
  Result<TrainConfig> object_form = Parse(Base(",\n  \"zero_optimization\": {\"stage\": 1}, \"allgather_size\": 2e8"));
  REQUIRE(object_form.ok());
  CHECK(object_form->engine.zero.allgather_bucket_size == 500'000'000);
  CHECK(object_form->warnings == std::vector<std::string>{
                                     "train.json: $.allgather_size: unknown key, ignored (DeepSpeed ignores keys it "
                                     "does not know; check the spelling if it was meant for dslaunch-worker)"});
  CHECK(ErrorOf(Base(",\n  \"zero_optimization\": 1")) == "train.json: $.zero_optimization: expected an object, got 1");
  // An object in train.json replaces the referenced file's boolean.
  const ConfigLoader ds = Files({{"ds.json", R"({"zero_optimization": true})"}});
  Result<TrainConfig> merged = Parse(Base(",\n  \"deepspeed_config\": \"ds.json\", \"zero_optimization\": {\"stage\": 3}"), ds);
  REQUIRE(merged.ok());
  CHECK(merged->engine.zero.stage == 3);
  CHECK(merged->warnings.empty());
}

TEST_CASE("Every \"auto\" of the Hugging Face Trainer is reported in one message, grouped by file") {
  // Before: only the first one the parser reached, so a user fixed them one run at a time.
  CHECK(ErrorOf(R"({"train_batch_size": "auto", "gradient_accumulation_steps": "auto",
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": ["auto", 0.999]}},
    "fp16": {"enabled": "auto"}, "zero_optimization": {"stage": 2, "reduce_bucket_size": "auto"},
    "model": {"type": "gpt", "n_layer": 1, "n_head": 1, "n_embd": 8, "block_size": 8},
    "data": {"train": "t.bin"}, "train": {"steps": 1}})") ==
        "train.json: $.fp16.enabled, $.gradient_accumulation_steps, $.optimizer.params.betas[0], "
        "$.optimizer.params.lr, $.train_batch_size: 5 values are \"auto\", "
        "which only the Hugging Face Trainer fills in; give each a value");
  // reduce_bucket_size is an offload buffer key: its "auto" is sized to fit here (docs/offload.md).
  // train.json's keys override the referenced file's (its optimizer.params.lr "auto" is not used).
  const ConfigLoader ds = Files({{"ds.json", R"({"train_batch_size": "auto", "optimizer": {"type": "AdamW",
    "params": {"lr": "auto"}}, "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": "auto"}},
    "gradient_clipping": "auto"})"}});
  CHECK(ErrorOf(Base(",\n  \"deepspeed_config\": \"ds.json\", \"gradient_clipping\": \"auto\""), ds) ==
        "train.json: $.gradient_clipping; ds.json: $.scheduler.params.warmup_max_lr, $.train_batch_size: 3 values are "
        "\"auto\", which only the Hugging Face Trainer fills in; give each a value");
  CHECK(ErrorOf(Base(",\n  \"steps_per_print\": \"auto\"")) ==
        "train.json: $.steps_per_print: 1 value is \"auto\", which only the Hugging Face Trainer fills in; give it a "
        "value");
  // The runtime's own sections are not DeepSpeed's: checkpoint.load "auto" is a value there.
  Result<TrainConfig> load = Parse(Base(",\n  \"checkpoint\": {\"dir\": \"c\", \"load\": \"auto\"}"));
  REQUIRE_MESSAGE(load.ok(), load.status().ToString());
  CHECK(load->checkpoint.load == CheckpointLoad::kLatest);
}

TEST_CASE("The unimplemented-keys warning carries one prefix") {
  Result<TrainConfig> r = Parse(Base(",\n  \"wall_clock_breakdown\": false"));
  REQUIRE(r.ok());
  CHECK(UnimplementedWarning(*r) ==
        "warning: 1 DeepSpeed key(s) not implemented here, ignored: $.wall_clock_breakdown");
}

}  // namespace
}  // namespace dslaunch::runtime
