// meta.json (docs/checkpoint.md, "meta.json"): the documented fields with hand-worked derived
// values, a round trip of every field, and each damage refused with the file and the JSON path.
#include "runtime/checkpoint/meta.h"

#include <doctest/doctest.h>

#include <functional>
#include <map>
#include <span>
#include <string>
#include <nlohmann/json.hpp>

#include "tests/runtime/checkpoint/sample_meta.h"

namespace dslaunch::runtime {
namespace {

using Json = nlohmann::json;


// A damage done to a valid meta.json, and the error that names it.
struct Damage {
  const char* what;
  std::function<void(Json&)> damage;
  std::string error;  // after "ck/meta.json: "
};

// Each damage done to `valid`'s meta.json is refused as data loss with its error.
void CheckRefused(const CheckpointMeta& valid, std::span<const Damage> damages) {
  for (const Damage& c : damages) {
    CAPTURE(c.what);
    Json j = Json::parse(CheckpointMetaToJson(valid));
    c.damage(j);
    auto r = CheckpointMetaFromJson(j.dump(1), "ck/meta.json");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kDataLoss);
    CHECK(r.status().message() == "ck/meta.json: " + c.error);
  }
}

TEST_CASE("meta.json holds the documented fields, with the derived ones worked out") {
  const Json j = Json::parse(CheckpointMetaToJson(SampleCheckpointMeta()));
  CHECK(j.at("format") == "dslaunch-checkpoint");
  CHECK(j.at("version") == 1);
  CHECK(j.at("step") == 12);
  CHECK(j.at("applied_steps") == 10);
  CHECK(j.at("optimizer_step") == 10);
  CHECK(j.at("samples_seen") == 96);  // 12 steps x 8 samples
  CHECK(j.at("lr_scheduler").at("last_batch_iteration") == 9);  // DeepSpeed's: applied steps - 1
  CHECK(j.at("rng").at("seed") == 5);
  CHECK(j.at("state_dtype") == "F32");
  CHECK(j.at("partitions").at(0).at("crc32c") == "0000beef");  // 8 lower-case digits, zeros kept
  CHECK(j.at("partitions").at(1).at("crc32c") == "deadbeef");
  CHECK(j.at("partitions").at(1).at("begin") == 5);
  CHECK(j.at("partitions").at(1).at("bytes") == 301);
  CHECK(j.at("loss_scaler") == Json{{"scale", 1024.0}, {"iteration", 12}, {"last_overflow_iteration", 9},
                                    {"hysteresis_left", 2}});
  CHECK(j.at("parameters").at(1) == Json{{"name", "ln_f.weight"}, {"shape", {4}}, {"offset", 6}, {"numel", 4}});
}

TEST_CASE("meta.json round-trips every field") {
  const CheckpointMeta a = SampleCheckpointMeta();
  auto b = CheckpointMetaFromJson(CheckpointMetaToJson(a), "meta.json");
  REQUIRE_MESSAGE(b.ok(), b.status().ToString());
  CHECK(b->version == a.version);
  CHECK(b->step == a.step);
  CHECK(b->applied_steps == a.applied_steps);
  CHECK(b->optimizer_step == a.optimizer_step);
  CHECK(b->world_size == a.world_size);
  CHECK(b->zero_stage == a.zero_stage);
  CHECK(b->precision == a.precision);
  CHECK(b->model == a.model);
  CHECK(b->optimizer == a.optimizer);
  CHECK(b->numel == a.numel);
  CHECK(b->global_batch == a.global_batch);
  CHECK(b->seed == a.seed);
  CHECK(b->state_tensors == a.state_tensors);
  CHECK(b->config_sha256 == a.config_sha256);
  REQUIRE(b->parameters.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CAPTURE(i);
    CHECK(b->parameters[i].name == a.parameters[i].name);
    CHECK(b->parameters[i].shape == a.parameters[i].shape);
    CHECK(b->parameters[i].offset == a.parameters[i].offset);
    CHECK(b->parameters[i].numel == a.parameters[i].numel);
  }
  REQUIRE(b->partitions.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CAPTURE(i);
    CHECK(b->partitions[i].rank == a.partitions[i].rank);
    CHECK(b->partitions[i].begin == a.partitions[i].begin);
    CHECK(b->partitions[i].end == a.partitions[i].end);
    CHECK(b->partitions[i].file == a.partitions[i].file);
    CHECK(b->partitions[i].bytes == a.partitions[i].bytes);
    CHECK(b->partitions[i].crc32c == a.partitions[i].crc32c);
  }
  CHECK(b->loss_scaler.scale == a.loss_scaler.scale);
  CHECK(b->loss_scaler.iteration == a.loss_scaler.iteration);
  CHECK(b->loss_scaler.last_overflow_iteration == a.loss_scaler.last_overflow_iteration);
  CHECK(b->loss_scaler.hysteresis_left == a.loss_scaler.hysteresis_left);
}

TEST_CASE("CheckpointMetaFromJson refuses a damaged meta.json as data loss, naming the file and the JSON path") {
  const Damage cases[] = {
      {"another format", [](Json& j) { j["format"] = "zip"; }, "$.format is \"zip\", not a dslaunch checkpoint"},
      {"a later version", [](Json& j) { j["version"] = 3; },
       "$.version 3 is not supported by this build (it reads versions 1 and 2)"},
      {"version 2 without its grid", [](Json& j) { j["version"] = 2; }, "$.grid must be an object"},
      {"a missing field", [](Json& j) { j.erase("seed"); }, "$.seed missing"},
      {"a field of the wrong type", [](Json& j) { j["step"] = "12"; }, "$.step must be an integer"},
      {"a negative count", [](Json& j) { j["numel"] = -10; }, "$.numel must be a non-negative integer"},
      {"no world", [](Json& j) { j["world_size"] = 0; }, "$.world_size must be at least 1"},
      {"more applied steps than steps", [](Json& j) { j["applied_steps"] = 13; },
       "$.applied_steps must be between 0 and $.step"},
      {"negative applied steps", [](Json& j) { j["applied_steps"] = -1; },
       "$.applied_steps must be between 0 and $.step"},
      {"a gap between partitions", [](Json& j) { j["partitions"][1]["begin"] = 6; },
       "$.partitions[1] does not continue the partitions in rank order (rank 1, [6, 10))"},
      {"overlapping partitions", [](Json& j) { j["partitions"][1]["begin"] = 4; },
       "$.partitions[1] does not continue the partitions in rank order (rank 1, [4, 10))"},
      {"partitions out of rank order", [](Json& j) { j["partitions"][1]["rank"] = 0; },
       "$.partitions[1] does not continue the partitions in rank order (rank 0, [5, 10))"},
      {"a partition ending before it begins", [](Json& j) { j["partitions"][1]["end"] = 4; },
       "$.partitions[1] does not continue the partitions in rank order (rank 1, [5, 4))"},
      {"a short checksum", [](Json& j) { j["partitions"][0]["crc32c"] = "beef"; },
       "$.partitions[0].crc32c must be 8 lower-case hex digits"},
      {"a long checksum", [](Json& j) { j["partitions"][0]["crc32c"] = "0deadbeef"; },
       "$.partitions[0].crc32c must be 8 lower-case hex digits"},
      {"an upper-case checksum", [](Json& j) { j["partitions"][1]["crc32c"] = "DEADBEEF"; },
       "$.partitions[1].crc32c must be 8 lower-case hex digits"},
      {"a shard path", [](Json& j) { j["partitions"][0]["file"] = "../rank00000.safetensors"; },
       "$.partitions[0].file must be a file name"},
      {"partitions not covering numel", [](Json& j) { j["numel"] = 11; },
       "$.partitions must be 2 partitions covering [0, 11)"},
      {"fewer partitions than ranks", [](Json& j) { j["world_size"] = 3; },
       "$.partitions must be 3 partitions covering [0, 10)"},
      // Absurd values a hand edit or a bit flip can leave (before: a step of 1e18 resumed).
      {"a negative step", [](Json& j) { j["step"] = -1; }, "$.step must not be negative"},
      {"more optimizer steps than steps", [](Json& j) { j["optimizer_step"] = 13; },
       "$.optimizer_step must be between 0 and $.step"},
      {"no such ZeRO stage", [](Json& j) { j["zero_stage"] = 4; }, "$.zero_stage must be 0, 1, 2 or 3"},
      {"a world size past int", [](Json& j) { j["world_size"] = 4294967298ll; }, "$.world_size is out of range"},
      {"a parameter's numel against its shape", [](Json& j) { j["parameters"][1]["numel"] = 5; },
       "$.parameters[1].numel is 5, but its shape holds 4 elements"},
      {"a shape larger than the model", [](Json& j) { j["parameters"][0]["shape"] = {1ll << 40, 1ll << 40}; },
       "$.parameters[0].numel is 6, but its shape holds more than $.numel elements"},
      {"a negative dimension", [](Json& j) { j["parameters"][0]["shape"] = {-3, -2}; },
       "$.parameters[0].shape must hold non-negative integers"},
      {"a parameter past the end", [](Json& j) { j["parameters"][1]["offset"] = 7; },
       "$.parameters[1] ends past $.numel 10 (offset 7, numel 4)"},
      {"another rank's shard", [](Json& j) { j["partitions"][1]["file"] = "rank00000.safetensors"; },
       "$.partitions[1].file is \"rank00000.safetensors\", not rank 1's shard rank00001.safetensors"},
      {"a zero loss scale", [](Json& j) { j["loss_scaler"]["scale"] = 0.0; },
       "$.loss_scaler.scale must be a positive finite number"},
      {"no loss scaler", [](Json& j) { j.erase("loss_scaler"); }, "$.loss_scaler must be an object"},
      {"a loss scaler without its iteration", [](Json& j) { j["loss_scaler"].erase("iteration"); },
       "$.loss_scaler.iteration missing"},
  };
  CheckRefused(SampleCheckpointMeta(), cases);
  for (const char* text : {"", "{\"format\": \"dslaunch-checkpoint\", \"vers", "[1, 2]"}) {
    CAPTURE(text);
    auto r = CheckpointMetaFromJson(text, "ck/meta.json");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kDataLoss);
    CHECK(r.status().message() == "ck/meta.json: $ is not a JSON object (truncated or corrupt?)");
  }
}

TEST_CASE("A grid's meta.json is version 2: the grid, and each partition's elements and pieces") {
  const Json j = Json::parse(CheckpointMetaToJson(SampleGridCheckpointMeta()));
  CHECK(j.at("version") == 2);
  CHECK(j.at("grid") == Json{{"pipeline", 2}, {"data", 1}, {"tensor", 2}});
  CHECK(j.at("partitions").at(0) == Json{{"rank", 0},
                                         {"file", "rank00000.safetensors"},
                                         {"bytes", 200},
                                         {"crc32c", "00000001"},
                                         {"elements", 4},
                                         {"pieces", {{0, 5, 2, 2}}}});
  CHECK(j.at("partitions").at(3).at("pieces") == Json{{9, 0, 1, 1}});
  // Without a grid: version 1, no grid.
  CHECK_FALSE(Json::parse(CheckpointMetaToJson(SampleCheckpointMeta())).contains("grid"));

  const CheckpointMeta a = SampleGridCheckpointMeta();
  auto b = CheckpointMetaFromJson(CheckpointMetaToJson(a), "meta.json");
  REQUIRE_MESSAGE(b.ok(), b.status().ToString());
  CHECK(b->version == 2);
  CHECK(b->grid.pipeline == 2);
  CHECK(b->grid.tensor == 2);
  REQUIRE(b->partitions.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(b->partitions[i].pieces == a.partitions[i].pieces);
    CHECK(b->partitions[i].elements() == a.partitions[i].elements());
    CHECK(b->partitions[i].crc32c == a.partitions[i].crc32c);
  }
  // The shard header records the element count where a version 1 shard has its range.
  CHECK(ShardHeaderOf(12, 4, a.partitions[1]) ==
        std::map<std::string, std::string>{{"step", "12"}, {"rank", "1"}, {"world_size", "4"}, {"elements", "4"}});
  CHECK(ShardHeaderOf(12, 2, SampleCheckpointMeta().partitions[1]) ==
        std::map<std::string, std::string>{
            {"step", "12"}, {"rank", "1"}, {"world_size", "2"}, {"begin", "5"}, {"end", "10"}});
}

TEST_CASE("A damaged version 2 meta.json is refused, naming the file and the JSON path") {
  const Damage cases[] = {
      {"a grid of another world", [](Json& j) { j["grid"]["data"] = 2; },
       "$.grid must be three sizes of at least 1 whose product is $.world_size 4"},
      {"a grid of no stages", [](Json& j) { j["grid"]["pipeline"] = 0; },
       "$.grid must be three sizes of at least 1 whose product is $.world_size 4"},
      {"a grid size past the world", [](Json& j) { j["grid"]["tensor"] = 1 << 30; },
       "$.grid must be three sizes of at least 1 whose product is $.world_size 4"},
      {"no pieces", [](Json& j) { j["partitions"][2].erase("pieces"); }, "$.partitions[2].pieces must be an array"},
      {"a piece of three numbers", [](Json& j) { j["partitions"][2]["pieces"][0] = {4, 0, 1}; },
       "$.partitions[2].pieces[0] must be [begin, stride, run, count], non-negative integers"},
      {"a negative begin", [](Json& j) { j["partitions"][2]["pieces"][0][0] = -4; },
       "$.partitions[2].pieces[0] must be [begin, stride, run, count], non-negative integers"},
      {"an empty run", [](Json& j) { j["partitions"][2]["pieces"][0][2] = 0; },
       "$.partitions[2].pieces[0] must have run and count of at least 1, and stride 0 for one run, else >= run"},
      {"overlapping runs of one piece", [](Json& j) { j["partitions"][0]["pieces"][0][1] = 1; },
       "$.partitions[0].pieces[0] must have run and count of at least 1, and stride 0 for one run, else >= run"},
      {"a piece past the end", [](Json& j) { j["partitions"][3]["pieces"][0][0] = 10; },
       "$.partitions[3].pieces[0] ends past $.numel 10"},
      {"a strided piece past the end", [](Json& j) { j["partitions"][1]["pieces"][0][3] = 3; },
       "$.partitions[1].pieces[0] ends past $.numel 10"},
      {"a huge count", [](Json& j) { j["partitions"][0]["pieces"][0] = {0, 0, 1, 1ull << 62}; },
       "$.partitions[0].pieces[0] must have run and count of at least 1, and stride 0 for one run, else >= run"},
      {"too many runs", [](Json& j) { j["numel"] = 1ull << 40; j["partitions"][0]["pieces"][0] = {0, 2, 1, (1 << 24) + 1}; },
       "$.partitions[0].pieces[0] brings the runs past 16777216: not a checkpoint"},
      {"elements against the pieces", [](Json& j) { j["partitions"][0]["elements"] = 5; },
       "$.partitions[0].elements is 5, but the pieces hold 4"},
      {"an element held twice", [](Json& j) { j["partitions"][3]["pieces"][0][0] = 8; },
       "$.partitions hold element 8 twice"},
      {"an element left out", [](Json& j) { j["partitions"][2]["pieces"] = Json::array(); j["partitions"][2]["elements"] = 0; },
       "$.partitions leave elements [4, 5) out"},
      {"the last element left out", [](Json& j) { j["numel"] = 11; },
       "$.partitions leave elements [10, 11) out"},
      {"partitions out of rank order", [](Json& j) { j["partitions"][1]["rank"] = 2; },
       "$.partitions[1] is rank 2's: the partitions must be in rank order"},
      {"fewer partitions than ranks", [](Json& j) { j["partitions"].erase(3); },
       "$.partitions must be 4 partitions, one per rank"},
  };
  CheckRefused(SampleGridCheckpointMeta(), cases);
}

}  // namespace
}  // namespace dslaunch::runtime
