// train.json's pipeline and tensor_parallel sections (docs/parallelism.md, docs/train-json.md
// "pipeline" and "tensor_parallel"): read into PipelineConfig and TensorParallelConfig, the batch
// counted over the data-parallel copies, and what a pipelined or tensor-parallel run cannot take
// refused before it starts, naming the key.
#include <doctest/doctest.h>

#include <span>
#include <string>

#include "runtime/config/train_config.h"

namespace dslaunch::runtime {
namespace {

// A valid train.json of a 4-layer, 4-head gpt (or the mlp) with `extra` appended at the top level.
std::string Config(const std::string& extra, bool mlp = false) {
  const std::string model = mlp ? R"({"type": "mlp", "layers": [784, 10]})"
                                : R"({"type": "gpt", "n_layer": 4, "n_head": 4, "n_embd": 32, "block_size": 16})";
  const std::string data = mlp ? R"({"format": "idx", "train": "x.idx", "train_labels": "y.idx"})"
                               : R"({"train": "data/train.bin"})";
  return R"({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "AdamW"},
    "train": {"steps": 10}, "model": )" + model + R"(, "data": )" + data + extra + "}";
}

Result<TrainConfig> Parse(const std::string& text, int world) {
  return ParseTrainConfig(text, "train.json", world, [](const std::string& path) -> Result<std::string> {
    return NotFoundError(path + ": no such file");
  });
}

// Sections appended to the valid train.json (of the mlp with `mlp`) on `world` ranks, and the
// error that refuses them.
struct Refusal {
  std::string extra;
  int world;
  std::string error;
  bool mlp = false;
};

// Each refusal's train.json fails to parse with kInvalidArgument and its error.
void CheckRefused(std::span<const Refusal> refusals) {
  for (const Refusal& c : refusals) {
    CAPTURE(c.extra);
    auto parsed = Parse(Config(c.extra, c.mlp), c.world);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
    CHECK_MESSAGE(parsed.status().message().find(c.error) != std::string::npos, parsed.status().message());
  }
}

TEST_CASE("The pipeline section sets stages, partition method and schedule, with DeepSpeed's defaults") {
  auto none = Parse(Config(""), 4);
  REQUIRE(none.ok());
  CHECK(none->pipeline.stages == 1);
  CHECK(none->pipeline.partition_method == PartitionMethod::kParameters);
  CHECK(none->pipeline.schedule == PipeSchedule::k1F1B);
  CHECK(none->batch.gradient_accumulation_steps == 2);  // 16 = 2 x 2 x 4 ranks

  auto set = Parse(Config(R"(, "pipeline": {"stages": 2, "partition_method": "Uniform", "schedule": "gpipe"})"), 4);
  REQUIRE_MESSAGE(set.ok(), set.status().ToString());
  CHECK(set->pipeline.stages == 2);
  CHECK(set->pipeline.partition_method == PartitionMethod::kUniform);
  CHECK(set->pipeline.schedule == PipeSchedule::kGPipe);
  // The batch counts the data-parallel copies: 4 ranks / 2 stages.
  CHECK(set->batch.gradient_accumulation_steps == 4);

  // DeepSpeed's engine keys are recognised and change nothing.
  auto deepspeed = Parse(Config(R"(, "pipeline": {"stages": 2, "partition": "best", "seed_layers": false,
                                   "activation_checkpoint_interval": 0, "pipe_partitioned": true,
                                   "grad_partitioned": true})"),
                         4);
  REQUIRE_MESSAGE(deepspeed.ok(), deepspeed.status().ToString());
  CHECK(deepspeed->pipeline.stages == 2);
  CHECK(deepspeed->unimplemented_keys.size() == 5);
  // "auto" (DeepSpeed's default: its PipelineModule decides) needs a number here.
  auto automatic = Parse(Config(R"(, "pipeline": {"stages": "auto"})"), 4);
  REQUIRE_FALSE(automatic.ok());
  CHECK(automatic.status().message().find("$.pipeline.stages") != std::string::npos);
}

TEST_CASE("A pipeline the job, the model or the other sections cannot take is refused, naming the key") {
  const Refusal cases[] = {
      {R"(, "pipeline": {"stages": 3})", 4,
       "train.json: $.pipeline.stages: 3 does not divide the 4 ranks of the job: give the job a multiple of 3 ranks "
       "(each stage has world / stages data-parallel copies)"},
      {R"(, "pipeline": {"stages": 8})", 8, "train.json: $.pipeline.stages: 8 is more than model.n_layer 4: each stage "
                                            "holds at least one block"},
      {R"(, "pipeline": {"stages": 2}, "zero_optimization": {"stage": 2})", 4,
       "train.json: $.zero_optimization.stage: 2 with pipeline.stages 2: a pipelined run takes ZeRO stage 0 or 1, as "
       "DeepSpeed's pipeline engine does (stages 2-3 reduce the gradients of every micro-batch)"},
      {R"(, "pipeline": {"stages": 2})", 2, "train.json: $.pipeline.stages: 2: only the gpt model is split into stages",
       true},
      {R"(, "pipeline": {"stages": 2, "schedule": "1f1d"})", 4,
       "train.json: $.pipeline.schedule: expected one of 1f1b, gpipe, got \"1f1d\" (did you mean \"1f1b\"?)"},
      {R"(, "pipeline": {"stages": 2, "partition_method": "type:transformer"})", 4,
       "train.json: $.pipeline.partition_method: expected one of parameters, uniform, got \"type:transformer\""},
      {R"(, "pipeline": {"stages": 0})", 4, "train.json: $.pipeline.stages: expected an integer"},
  };
  CheckRefused(cases);
}

TEST_CASE("tensor_parallel.autotp_size sets the tensor ranks, and DeepSpeed's 0 or an absent section is 1") {
  auto none = Parse(Config(""), 4);
  REQUIRE_MESSAGE(none.ok(), none.status().ToString());
  CHECK(none->tensor_parallel.size == 1);
  CHECK(RanksPerModelCopy(*none) == 1);
  auto off = Parse(Config(R"(, "tensor_parallel": {"autotp_size": 0})"), 4);
  REQUIRE_MESSAGE(off.ok(), off.status().ToString());
  CHECK(off->tensor_parallel.size == 1);

  auto set = Parse(Config(R"(, "tensor_parallel": {"autotp_size": 2})"), 4);
  REQUIRE_MESSAGE(set.ok(), set.status().ToString());
  CHECK(set->tensor_parallel.size == 2);
  // The batch counts the data-parallel copies: 4 ranks / 2 tensor ranks, 2 micro-batches of 2 each.
  CHECK(set->batch.gradient_accumulation_steps == 4);
  // With stages too: 8 ranks / (2 stages x 2 tensor ranks).
  auto both = Parse(Config(R"(, "pipeline": {"stages": 2}, "tensor_parallel": {"autotp_size": 2})"), 8);
  REQUIRE_MESSAGE(both.ok(), both.status().ToString());
  CHECK(RanksPerModelCopy(*both) == 4);
  CHECK(both->batch.gradient_accumulation_steps == 4);
  // Checkpoints of a split model are in the whole model's coordinates (docs/checkpoint.md).
  auto saved = Parse(Config(R"(, "pipeline": {"stages": 2}, "tensor_parallel": {"autotp_size": 2},
                               "checkpoint": {"dir": "ckpt", "load": "auto"})"),
                     8);
  REQUIRE_MESSAGE(saved.ok(), saved.status().ToString());
  CHECK_FALSE(saved->checkpoint.dir.empty());

  // DeepSpeed's AutoTP keys for Hugging Face models are recognised and change nothing.
  auto deepspeed = Parse(Config(R"(, "tensor_parallel": {"autotp_size": 2, "tp": {"tp_size": 2}, "dtype": "bf16",
                                   "tp_overlap_comm": false, "keep_module_on_host": false, "preset_model": "llama",
                                   "partition_config": {}, "injection_policy_tuple": null})"),
                         4);
  REQUIRE_MESSAGE(deepspeed.ok(), deepspeed.status().ToString());
  CHECK(deepspeed->tensor_parallel.size == 2);
  CHECK(deepspeed->unimplemented_keys.size() == 7);
}

TEST_CASE("A tensor split the job, the model or the other sections cannot take is refused, naming the key") {
  const Refusal cases[] = {
      {R"(, "tensor_parallel": {"autotp_size": 3})", 3,
       "train.json: $.tensor_parallel.autotp_size: 3 tensor ranks cannot share model.n_head 4 heads evenly; choose a "
       "size that divides n_head"},
      {R"(, "tensor_parallel": {"autotp_size": 4})", 6,
       "train.json: $.tensor_parallel.autotp_size: pipeline.stages 1 x tensor_parallel.autotp_size 4 = 4 ranks per "
       "model copy does not divide the 6 ranks of the job: give the job a multiple of 4 ranks, or change the two "
       "sizes"},
      {R"(, "pipeline": {"stages": 2}, "tensor_parallel": {"autotp_size": 2})", 6,
       "train.json: $.tensor_parallel.autotp_size: pipeline.stages 2 x tensor_parallel.autotp_size 2 = 4 ranks per "
       "model copy does not divide the 6 ranks of the job"},
      {R"(, "tensor_parallel": {"autotp_size": 2})", 2,
       "train.json: $.tensor_parallel.autotp_size: 2: only the gpt model is split over tensor ranks", true},
      {R"(, "tensor_parallel": {"autotp_size": -1})", 4, "train.json: $.tensor_parallel.autotp_size:"},
      {R"(, "tensor_parallel": {"autotp_size": "auto"})", 4, "train.json: $.tensor_parallel.autotp_size:"},
  };
  CheckRefused(cases);
}

}  // namespace
}  // namespace dslaunch::runtime
