// Shared by the train.json parser's tests (train_config_test.cc, train_config_errors_test.cc): a
// minimal valid config that cases patch, the parse with no other files, and the error it gives.
#pragma once

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "runtime/config/train_config.h"

namespace dslaunch::runtime::testing {

using nlohmann::json;

// A minimal valid train.json; cases patch it.
inline json BaseConfig() {
  return json::parse(R"({
    "train_micro_batch_size_per_gpu": 4,
    "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
    "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 16},
    "data": {"train": "data/train.bin"},
    "train": {"steps": 10}
  })");
}

// A loader that finds no file: a referenced DeepSpeed config is "no such file".
inline ConfigLoader NoFiles() {
  return [](const std::string& path) -> Result<std::string> { return NotFoundError(path + ": no such file"); };
}

inline Result<TrainConfig> Parse(const json& doc, int world = 2) {
  return ParseTrainConfig(doc.dump(), "train.json", world, NoFiles());
}

// "OK", or the message of the kInvalidArgument the parse gives.
inline std::string ErrorOf(const json& doc, int world = 2) {
  Result<TrainConfig> r = Parse(doc, world);
  if (r.ok()) return "OK";
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  return r.status().message();
}

// Sets the value at a JSON pointer ("/zero_optimization/stage").
inline json With(json doc, const std::string& pointer, json value) {
  doc[json::json_pointer(pointer)] = std::move(value);
  return doc;
}

}  // namespace dslaunch::runtime::testing
