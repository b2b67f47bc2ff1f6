// zero_optimization.offload_param in train.json (docs/offload.md, "Keys"): parsed into the swap
// layer's OffloadParamConfig, errors naming the JSON path, notes once, stage 3 only.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "runtime/config/train_config.h"
#include "tests/runtime/config/train_json_fixture.h"

namespace dslaunch::runtime {
namespace {

using nlohmann::json;

json Doc(int stage, json offload_param) {
  json doc = testing::BaseConfig();
  doc["zero_optimization"] = {{"stage", stage}, {"offload_param", std::move(offload_param)}};
  return doc;
}

Result<TrainConfig> Parse(const json& doc) {
  return ParseTrainConfig(doc.dump(), "run/train.json", 2, [](const std::string& path) -> Result<std::string> {
    return NotFoundError(path);
  });
}

TEST_CASE("offload_param is parsed into the engine's options with DeepSpeed's defaults") {
  Result<TrainConfig> c = Parse(Doc(3, {{"device", "nvme"}, {"nvme_path", "/var/tmp/x"}, {"max_in_cpu", 1000}}));
  REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  CHECK(c->engine.offload_param.device == swap::OffloadDevice::kNvme);
  CHECK(c->engine.offload_param.nvme_path == "/var/tmp/x");
  CHECK(c->engine.offload_param.max_in_cpu == 1000);
  CHECK(c->engine.offload_param.buffer_count == 5);
  CHECK(c->engine.offload_param.buffer_size == 100000000);
  CHECK(c->unimplemented_keys.empty());
  CHECK(c->warnings.empty());

  Result<TrainConfig> relative = Parse(Doc(3, {{"device", "nvme"}, {"nvme_path", "swap"}}));
  REQUIRE(relative.ok());
  CHECK(relative->engine.offload_param.nvme_path == "run/swap");  // as the data paths, against the file's directory

  Result<TrainConfig> absent = Parse(Doc(3, json::object()));
  REQUIRE(absent.ok());
  CHECK(absent->engine.offload_param.device == swap::OffloadDevice::kNone);
}

TEST_CASE("offload_param errors name the JSON path, and stages other than 3 are refused") {
  struct Case {
    int stage;
    json block;
    std::string message;  // the whole message, or its start
  };
  const Case cases[] = {
      {2, {{"device", "nvme"}, {"nvme_path", "/x"}},
       "run/train.json: $.zero_optimization.offload_param.device: \"nvme\" needs zero_optimization.stage 3 (only "
       "stage 3 partitions parameters), stage is 2"},
      {3, {{"device", "disk"}},
       "run/train.json: $.zero_optimization.offload_param.device: must be \"none\", \"cpu\" or \"nvme\", got "
       "\"disk\""},
      {3, {{"device", "nvme"}},
       "run/train.json: $.zero_optimization.offload_param.nvme_path: required when device is \"nvme\" (a directory "
       "on a local disk)"},
      {3, {{"device", "nvme"}, {"nvme_path", "/x"}, {"buffer_count", 0}},
       "run/train.json: $.zero_optimization.offload_param.buffer_count: must be >= 1, got 0"},
      {3, {{"device", "nvme"}, {"nvme_path", "/x"}, {"max_in_cpu", -1}},
       "run/train.json: $.zero_optimization.offload_param.max_in_cpu: expected an integer"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.block.dump());
    Result<TrainConfig> r = Parse(Doc(c.stage, c.block));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message().substr(0, c.message.size()) == c.message);
  }
  Result<TrainConfig> typo = Parse(Doc(3, {{"device", "nvme"}, {"nvme_path", "/x"}, {"buffer_cont", 2}}));
  REQUIRE_FALSE(typo.ok());
  CHECK(typo.status().message().find("$.zero_optimization.offload_param.buffer_cont") != std::string::npos);
}

TEST_CASE("offload_param keys that change nothing here are accepted with one note per key, as offload_optimizer's") {
  Result<TrainConfig> c = Parse(Doc(3, {{"device", "cpu"}, {"pin_memory", true}}));
  REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  REQUIRE(c->warnings.size() == 2);
  CHECK(c->warnings[0].find("$.zero_optimization.offload_param.device: \"cpu\" accepted; the parameters already "
                            "live in host memory") != std::string::npos);
  CHECK(c->warnings[1].find("$.zero_optimization.offload_param.pin_memory: accepted") != std::string::npos);
}

}  // namespace
}  // namespace dslaunch::runtime
