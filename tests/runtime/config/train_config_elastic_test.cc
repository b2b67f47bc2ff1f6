// train.json at a changing world size (docs/train-json.md, "Batch size at another world size"):
// the elasticity section, the batch a restart keeps, the world sizes an error names, and the keys
// of restarts and hang detection (checkpoint resume at generation > 0, train.watchdog_timeout).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "runtime/config/train_config.h"

namespace dslaunch::runtime {
namespace {

using nlohmann::json;

json Base() {
  return json::parse(R"({
    "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
    "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 16},
    "data": {"train": "data/train.bin"},
    "train": {"steps": 10}
  })");
}

json With(json doc, const std::string& pointer, json value) {
  doc[json::json_pointer(pointer)] = std::move(value);
  return doc;
}

Result<TrainConfig> Parse(const json& doc, int world, int generation = 0) {
  return ParseTrainConfig(doc.dump(), "train.json", world, [](const std::string& p) -> Result<std::string> {
    return NotFoundError(p);
  }, generation);
}

std::string ErrorOf(const json& doc, int world, int generation = 0) {
  Result<TrainConfig> r = Parse(doc, world, generation);
  if (r.ok()) return "OK";
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  return r.status().message();
}

// Bases 2 and LCM 2 scale to 8; valid at 1, 2 and 4 (runtime/config/elastic_batch.h).
json Elastic() {
  return With(Base(), "/elasticity",
              json::parse(R"({"enabled": true, "max_train_batch_size": 8, "micro_batch_sizes": [2],
                              "min_gpus": 1, "max_gpus": 4, "prefer_larger_batch": true, "version": 0.1,
                              "min_time": 20})"));
}

TEST_CASE("An enabled elasticity section chooses the batch and splits it at the world size") {
  for (auto [world, accumulation] : {std::pair{1, 4}, {2, 2}, {4, 1}}) {
    CAPTURE(world);
    auto c = Parse(Elastic(), world);
    REQUIRE_MESSAGE(c.ok(), c.status().ToString());
    CHECK(c->batch.train_batch_size == 8);
    CHECK(c->batch.micro_batch_per_gpu == 2);
    CHECK(c->batch.gradient_accumulation_steps == accumulation);
    REQUIRE(c->elastic_batch.has_value());
    CHECK(c->elastic_batch->valid_world_sizes == std::vector<int64_t>{1, 2, 4});
    CHECK(c->unimplemented_keys.empty());
  }
  CHECK(BatchSummary(*Parse(Elastic(), 2), 2) ==
        "batch: elasticity chose train_batch_size 8, valid at world sizes 1, 2, 4; at world size 2: "
        "micro-batch 2 x accumulation 2");
}

TEST_CASE("A world size elasticity excludes is refused with the sizes it allows") {
  CHECK(ErrorOf(Elastic(), 3) ==
        "train.json: $.elasticity: world size 3 cannot keep the elastic train_batch_size 8: it can run at world "
        "sizes 1, 2, 4");
  CHECK(ErrorOf(Elastic(), 8) ==
        "train.json: $.elasticity: world size 8 cannot keep the elastic train_batch_size 8: it can run at world "
        "sizes 1, 2, 4");
}

TEST_CASE("Batch keys beside elasticity are refused unless ignore_non_elastic_batch_info, as in DeepSpeed") {
  const json with_batch = With(Elastic(), "/train_micro_batch_size_per_gpu", 4);
  CHECK(ErrorOf(with_batch, 2) ==
        "train.json: $.train_micro_batch_size_per_gpu: elasticity chooses the batch: remove train_batch_size, "
        "train_micro_batch_size_per_gpu and gradient_accumulation_steps, or set "
        "elasticity.ignore_non_elastic_batch_info to true to have them ignored (as DeepSpeed)");
  auto ignored = Parse(With(with_batch, "/elasticity/ignore_non_elastic_batch_info", true), 2);
  REQUIRE(ignored.ok());
  CHECK(ignored->batch.micro_batch_per_gpu == 2);
  CHECK(ignored->warnings == std::vector<std::string>{
                                 "train.json: $.train_micro_batch_size_per_gpu: ignored: elasticity chooses the batch "
                                 "(elasticity.ignore_non_elastic_batch_info is true)"});
}

TEST_CASE("The elasticity section is checked key by key") {
  struct Case {
    json doc;
    const char* message;
  };
  const Case cases[] = {
      {With(Base(), "/elasticity", json::parse(R"({"enabled": true, "micro_batch_sizes": [2]})")),
       "train.json: $.elasticity.max_train_batch_size: required when elasticity is enabled"},
      {With(Base(), "/elasticity", json::parse(R"({"enabled": true, "max_train_batch_size": 8})")),
       "train.json: $.elasticity.micro_batch_sizes: required when elasticity is enabled"},
      {With(Elastic(), "/elasticity/micro_batch_sizes", json::array()),
       "train.json: $.elasticity.micro_batch_sizes: needs at least one micro-batch size"},
      {With(Elastic(), "/elasticity/max_gpus", 0),
       "train.json: $.elasticity.max_gpus: expected an integer >= 1, got 0"},
      {With(Elastic(), "/elasticity/min_gpus", 8),
       "train.json: $.elasticity.max_gpus: 4 < min_gpus 8"},
      {With(Elastic(), "/elasticity/version", 0.2),
       "train.json: $.elasticity: version 0.2 is not implemented; this runtime implements DeepSpeed's elasticity "
       "version 0.1"},
      {With(Elastic(), "/elasticity/max_train_batch_sise", 8),
       "train.json: $.elasticity.max_train_batch_sise: unknown key (did you mean \"max_train_batch_size\"?)"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.message);
    CHECK(ErrorOf(c.doc, 2) == c.message);
  }
  // Disabled: checked, and the batch keys rule as usual.
  auto off = Parse(With(With(Elastic(), "/elasticity/enabled", false), "/train_batch_size", 6), 2);
  REQUIRE_MESSAGE(off.ok(), off.status().ToString());
  CHECK(off->batch.train_batch_size == 6);
  CHECK_FALSE(off->elastic_batch.has_value());
  // Version 0.2's model parallelism is recognised, not implemented.
  auto mp = Parse(With(Elastic(), "/elasticity/model_parallel_size", 1), 2);
  REQUIRE(mp.ok());
  CHECK(mp->unimplemented_keys == std::vector<std::string>{"$.elasticity.model_parallel_size"});
}

TEST_CASE("A batch that does not fit the world size names the world sizes it fits") {
  const json doc = With(With(Base(), "/train_batch_size", 32), "/train_micro_batch_size_per_gpu", 8);
  CHECK(ErrorOf(doc, 3) == "train.json: $.train_batch_size: train_batch_size 32 is not a multiple of micro 8 x "
                           "world 3 = 24; it fits world sizes 1, 2, 4");
  CHECK(ErrorOf(With(doc, "/gradient_accumulation_steps", 3), 1) ==
        "train.json: $.train_batch_size: train_batch_size 32 != micro 8 x accumulation 3 x world 1 = 24; no world "
        "size fits these keys");
  CHECK(ErrorOf(With(Base(), "/train_batch_size", 6), 4) ==
        "train.json: $.train_batch_size: train_batch_size 6 is not a multiple of accumulation 1 x world 4 = 4; it "
        "fits world sizes 1, 2, 3, 6");
}

TEST_CASE("A restart keeps train_batch_size at another world size and re-derives micro-batch and accumulation") {
  // Written for 4 ranks: 8 = 2 x 1 x 4.
  const json doc = With(With(With(Base(), "/train_batch_size", 8), "/train_micro_batch_size_per_gpu", 2),
                        "/gradient_accumulation_steps", 1);
  struct Case {
    int world;
    int64_t micro, accumulation;
    const char* note;
  };
  const Case cases[] = {
      {4, 2, 1, ""},
      {2, 2, 2, "re-derived at restart; as configured: train_batch_size 8 != micro 2 x accumulation 1 x world 2 = 4"},
      {1, 2, 4, "re-derived at restart; as configured: train_batch_size 8 != micro 2 x accumulation 1 x world 1 = 2"},
      {8, 1, 1, "re-derived at restart; as configured: train_batch_size 8 != micro 2 x accumulation 1 x world 8 = 16"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.world);
    auto r = Parse(doc, c.world, /*generation=*/1);
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    CHECK(r->batch.train_batch_size == 8);
    CHECK(r->batch.micro_batch_per_gpu == c.micro);
    CHECK(r->batch.gradient_accumulation_steps == c.accumulation);
    CHECK(r->batch_note == c.note);
  }
  CHECK(BatchSummary(*Parse(doc, 2, 1), 2) ==
        "batch: train_batch_size 8 = micro-batch 2 x accumulation 2 x world size 2 (re-derived at restart; as "
        "configured: train_batch_size 8 != micro 2 x accumulation 1 x world 2 = 4)");
  // Generation 0 follows DeepSpeed: the three keys must agree.
  CHECK(ErrorOf(doc, 2) == "train.json: $.train_batch_size: train_batch_size 8 != micro 2 x accumulation 1 x world "
                           "2 = 4; it fits world size 4");
  // A world size that does not divide the batch cannot keep it.
  CHECK(ErrorOf(doc, 3, 1) == "train.json: $.train_batch_size: world size 3 cannot keep train_batch_size 8 at a "
                              "restart: it can run at world sizes 1, 2, 4, 8");
  // Batch and accumulation without a micro-batch: the micro-batch follows as in DeepSpeed when it
  // can, and is bounded by the per-rank share otherwise.
  const json no_micro = With(With(Base(), "/train_batch_size", 32), "/gradient_accumulation_steps", 2);
  auto wide = Parse(no_micro, 32, 1);
  REQUIRE(wide.ok());
  CHECK(wide->batch.micro_batch_per_gpu == 1);
  CHECK(wide->batch.gradient_accumulation_steps == 1);
}

TEST_CASE("A restart resumes from checkpoint.dir without `load`, a first start does not") {
  const json doc = With(With(Base(), "/train_batch_size", 8), "/checkpoint", json::parse(R"({"dir": "ckpt"})"));
  auto first = Parse(doc, 2, 0);
  REQUIRE(first.ok());
  CHECK_FALSE(first->checkpoint.resume_newest);
  CHECK(first->checkpoint.load == CheckpointLoad::kNone);
  auto restart = Parse(doc, 2, 3);
  REQUIRE(restart.ok());
  CHECK(restart->checkpoint.resume_newest);
  CHECK(restart->checkpoint.dir == "ckpt");
  auto no_dir = Parse(With(Base(), "/train_batch_size", 8), 2, 3);
  REQUIRE(no_dir.ok());
  CHECK_FALSE(no_dir->checkpoint.resume_newest);
}

TEST_CASE("train.watchdog_timeout is seconds >= 0, absent by default") {
  const json doc = With(Base(), "/train_batch_size", 8);
  auto absent = Parse(doc, 2);
  REQUIRE(absent.ok());
  CHECK_FALSE(absent->train.watchdog_timeout.has_value());
  auto set = Parse(With(doc, "/train/watchdog_timeout", 90.5), 2);
  REQUIRE(set.ok());
  CHECK(set->train.watchdog_timeout == 90.5);
  auto off = Parse(With(doc, "/train/watchdog_timeout", 0), 2);
  REQUIRE(off.ok());
  CHECK(off->train.watchdog_timeout == 0.0);
  CHECK(ErrorOf(With(doc, "/train/watchdog_timeout", -1), 2) ==
        "train.json: $.train.watchdog_timeout: expected a number 0.0-604800.0, got -1");
}

}  // namespace
}  // namespace dslaunch::runtime
