// zero_optimization.offload_optimizer, aio and sub_group_size in train.json (docs/train-json.md,
// docs/offload.md "Keys"): DeepSpeed's defaults, errors naming the JSON path, warnings for keys
// that change nothing here.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "runtime/config/train_config.h"

namespace dslaunch::runtime {
namespace {

using nlohmann::json;

json Base() {
  return json::parse(R"({
    "train_micro_batch_size_per_gpu": 4,
    "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
    "zero_optimization": {"stage": 2},
    "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 16},
    "data": {"train": "data/train.bin"},
    "train": {"steps": 10}
  })");
}

Result<TrainConfig> Parse(const json& doc) {
  return ParseTrainConfig(doc.dump(), "/cfg/train.json", 2, [](const std::string& path) -> Result<std::string> {
    return NotFoundError(path + ": no such file");
  });
}

json With(json doc, const std::string& pointer, json value) {
  doc[json::json_pointer(pointer)] = std::move(value);
  return doc;
}

bool HasLine(const std::vector<std::string>& lines, const std::string& part) {
  for (const auto& l : lines) {
    if (l.find(part) != std::string::npos) return true;
  }
  return false;
}

TEST_CASE("Without offload keys the optimizer state stays in memory with DeepSpeed's defaults") {
  auto c = Parse(Base());
  REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  CHECK(c->engine.offload_optimizer.device == swap::OffloadDevice::kNone);
  CHECK(c->engine.offload_optimizer.buffer_count == 4);
  CHECK(c->engine.aio.block_size == 1048576);
  CHECK(c->engine.aio.queue_depth == 8);
  CHECK(c->engine.zero.sub_group_size == 1'000'000'000);
}

TEST_CASE("offload_optimizer with nvme, aio and sub_group_size reach the engine's options") {
  json doc = With(Base(), "/zero_optimization/offload_optimizer",
                  {{"device", "nvme"}, {"nvme_path", "swap"}, {"buffer_count", 3}, {"pin_memory", false}});
  doc = With(doc, "/zero_optimization/sub_group_size", 4096);
  doc["aio"] = {{"block_size", 262144}, {"queue_depth", 16}, {"thread_count", 1}, {"single_submit", true},
                {"overlap_events", false}};
  auto c = Parse(doc);
  REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  CHECK(c->unimplemented_keys.empty());
  CHECK(c->warnings.empty());
  const EngineOptions& o = c->engine;
  CHECK(o.offload_optimizer.device == swap::OffloadDevice::kNvme);
  CHECK(o.offload_optimizer.nvme_path == "/cfg/swap");  // relative paths resolve like the data paths
  CHECK(o.offload_optimizer.buffer_count == 3);
  CHECK(o.zero.sub_group_size == 4096);
  CHECK(o.aio.block_size == 262144);
  CHECK(o.aio.queue_depth == 16);
  CHECK(o.aio.single_submit);
  CHECK_FALSE(o.aio.overlap_events);
}

TEST_CASE("device cpu, pin_memory and several aio threads are accepted with one warning each") {
  json doc = With(Base(), "/zero_optimization/offload_optimizer", {{"device", "cpu"}, {"pin_memory", true}});
  doc["aio"] = {{"intra_op_parallelism", 4}};
  auto c = Parse(doc);
  REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  CHECK(c->engine.offload_optimizer.device == swap::OffloadDevice::kCpu);
  CHECK(c->warnings.size() == 3);
  CHECK(HasLine(c->warnings, "$.zero_optimization.offload_optimizer.device: \"cpu\" accepted"));
  CHECK(HasLine(c->warnings, "$.zero_optimization.offload_optimizer.pin_memory: accepted"));
  CHECK(HasLine(c->warnings, "$.aio.intra_op_parallelism: 4 accepted"));
}

TEST_CASE("Wrong offload and aio values are errors that name the JSON path") {
  struct Case {
    const char* pointer;
    json value;
    const char* error;
  };
  const json nvme = {{"device", "nvme"}, {"nvme_path", "/nvme"}};
  const Case cases[] = {
      {"/zero_optimization/offload_optimizer", {{"device", "disk"}},
       "$.zero_optimization.offload_optimizer.device: must be \"none\", \"cpu\" or \"nvme\", got \"disk\""},
      {"/zero_optimization/offload_optimizer", {{"device", "nvme"}},
       "$.zero_optimization.offload_optimizer.nvme_path: required when device is \"nvme\""},
      {"/zero_optimization/offload_optimizer", {{"device", "nvme"}, {"nvme_path", "/n"}, {"buffer_count", 0}},
       "$.zero_optimization.offload_optimizer.buffer_count: must be >= 1, got 0"},
      {"/zero_optimization/offload_optimizer", {{"device", "nvme"}, {"nvme_path", "/n"}, {"bufer_count", 2}},
       "$.zero_optimization.offload_optimizer.bufer_count"},
      {"/zero_optimization/sub_group_size", 0, "$.zero_optimization.sub_group_size"},
      {"/aio", {{"block_size", 1000}}, "$.aio.block_size: must be a positive multiple of 4096"},
      {"/aio", {{"queue_depth", 0}}, "$.aio.queue_depth: must be in [1, 4096], got 0"},
      {"/aio", {{"thread_count", 2}, {"intra_op_parallelism", 2}}, "$.aio.thread_count: is the older name"},
  };
  for (const Case& k : cases) {
    CAPTURE(k.pointer);
    CAPTURE(k.value.dump());
    auto c = Parse(With(Base(), k.pointer, k.value));
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().code() == StatusCode::kInvalidArgument);
    CHECK_MESSAGE(c.status().message().find(k.error) != std::string::npos, c.status().message());
    CHECK_MESSAGE(c.status().message().find("/cfg/train.json") != std::string::npos, c.status().message());
  }
}

}  // namespace
}  // namespace dslaunch::runtime
