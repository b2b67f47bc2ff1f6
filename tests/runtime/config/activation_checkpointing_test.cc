// DeepSpeed's activation_checkpointing block (docs/train-json.md, "activation_checkpointing"):
// present, it turns on the gpt model's per-block recomputation; number_checkpoints says how many
// blocks; the keys that mean nothing on a CPU rank are accepted with one warning line each.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "runtime/config/train_config.h"

namespace dslaunch::runtime {
namespace {

// A valid train.json of a 4-layer gpt (or the mlp) with `extra` appended at the top level.
std::string Config(const std::string& extra, bool mlp = false) {
  const std::string model = mlp ? R"({"type": "mlp", "layers": [784, 10]})"
                                : R"({"type": "gpt", "n_layer": 4, "n_head": 2, "n_embd": 32, "block_size": 16})";
  const std::string data = mlp ? R"({"format": "idx", "train": "x.idx", "train_labels": "y.idx"})"
                               : R"({"train": "data/train.bin"})";
  return R"({"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "AdamW"}, "train": {"steps": 10},
    "model": )" + model + R"(, "data": )" + data + extra + "}";
}

Result<TrainConfig> Parse(const std::string& text, std::map<std::string, std::string> files = {}) {
  return ParseTrainConfig(text, "train.json", 1, [files](const std::string& path) -> Result<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return NotFoundError(path + ": no such file");
    return it->second;
  });
}

int RecomputeBlocks(const TrainConfig& c) { return std::get<GptConfig>(c.model).recompute_blocks; }

TEST_CASE("activation_checkpointing turns on recomputation of every block, or of number_checkpoints blocks") {
  struct Case {
    std::string block;
    int recompute_blocks;
    std::vector<std::string> warnings;
  };
  const std::vector<Case> cases = {
      {"", 0, {}},
      {R"(, "activation_checkpointing": {})", 4, {}},
      {R"(, "activation_checkpointing": {"partition_activations": false, "cpu_checkpointing": false,
           "contiguous_memory_optimization": false, "synchronize_checkpoint_boundary": false, "profile": false})",
       4, {}},
      {R"(, "activation_checkpointing": {"number_checkpoints": 1})", 1, {}},
      {R"(, "activation_checkpointing": {"number_checkpoints": 4})", 4, {}},
      {R"(, "activation_checkpointing": {"number_checkpoints": 100})", 4,
       {"train.json: $.activation_checkpointing.number_checkpoints: 100 > model.n_layer 4: every block is "
        "recomputed"}},
      {R"(, "activation_checkpointing": {"cpu_checkpointing": true, "partition_activations": true})", 4,
       {"train.json: $.activation_checkpointing.partition_activations: splits checkpoints across model-parallel "
        "ranks; this runtime has no model parallelism (each rank holds its own micro-batch's activations whole): no "
        "effect",
        "train.json: $.activation_checkpointing.cpu_checkpointing: moves checkpoints from GPU to host memory; a CPU "
        "rank's activations are in host memory already: no effect"}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.block);
    Result<TrainConfig> r = Parse(Config(c.block));
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    CHECK(RecomputeBlocks(*r) == c.recompute_blocks);
    CHECK(r->warnings == c.warnings);
    CHECK(r->unimplemented_keys.empty());  // no longer "recognised, not implemented"
  }
}

TEST_CASE("Every no-effect key of activation_checkpointing says why, once, naming the file it came from") {
  const std::string ds = R"({"activation_checkpointing": {"contiguous_memory_optimization": true,
    "synchronize_checkpoint_boundary": true, "profile": true, "number_checkpoints": 2}})";
  Result<TrainConfig> r = Parse(Config(R"(, "deepspeed_config": "ds.json")"), {{"ds.json", ds}});
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(RecomputeBlocks(*r) == 2);
  REQUIRE(r->warnings.size() == 3);
  CHECK(r->warnings[0].rfind("ds.json: $.activation_checkpointing.contiguous_memory_optimization: ", 0) == 0);
  CHECK(r->warnings[1].rfind("ds.json: $.activation_checkpointing.synchronize_checkpoint_boundary: ", 0) == 0);
  CHECK(r->warnings[2] ==
        "ds.json: $.activation_checkpointing.profile: the recomputation's time is not broken out of the step time; "
        "scripts/bench-recompute.sh measures it: no effect");
}

TEST_CASE("The mlp accepts activation_checkpointing with a note: it has no blocks to recompute") {
  Result<TrainConfig> r = Parse(Config(R"(, "activation_checkpointing": {"number_checkpoints": 3})", /*mlp=*/true));
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(r->warnings == std::vector<std::string>{"train.json: $.activation_checkpointing: the mlp model has no "
                                                "transformer blocks to recompute: no effect"});
}

TEST_CASE("A wrong activation_checkpointing value is refused with its JSON path") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"(, "activation_checkpointing": true)", "train.json: $.activation_checkpointing: expected an object, got true"},
      {R"(, "activation_checkpointing": {"number_checkpoints": 0})",
       "train.json: $.activation_checkpointing.number_checkpoints: expected an integer >= 1, got 0"},
      {R"(, "activation_checkpointing": {"profile": "yes"})",
       "train.json: $.activation_checkpointing.profile: expected true or false, got \"yes\""},
      {R"(, "activation_checkpointing": {"partition_activation": true})",
       "train.json: $.activation_checkpointing.partition_activation: unknown key (did you mean "
       "\"partition_activations\"?)"},
  };
  for (const auto& [block, message] : cases) {
    CAPTURE(block);
    Result<TrainConfig> r = Parse(Config(block));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == message);
  }
}

}  // namespace
}  // namespace dslaunch::runtime
