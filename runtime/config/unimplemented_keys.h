// The DeepSpeed keys this runtime recognises but does not implement (docs/train-json.md,
// "Recognised, not implemented"): one table, the one place that says which keys they are. A key
// listed here is accepted wherever it appears, its path collected into
// TrainConfig::unimplemented_keys and reported in one start-up warning ("not implemented here,
// ignored"), unless its entry names the only value accepted and the config gives another (an
// error: ignoring it would train something other than what was asked); being known, it also counts as a neighbour for the typo check of unknown keys
// (json_fields.h, Section::Finish).
#pragma once

#include <span>
#include <string_view>

namespace dslaunch::runtime::internal {

struct UnimplementedKey {
  std::string_view section;  // JSON path of the object holding the key: "$", "$.zero_optimization"
  std::string_view key;
  // For a key whose other values would change the training's arithmetic (amsgrad, quantized
  // gradients, 16-bit master weights, ...): the JSON text of DeepSpeed's default, the one value
  // accepted; any other is an error. Empty: every value changes nothing here.
  std::string_view only = "";
};

// Every entry, grouped by section in the order of docs/train-json.md. Pure data.
std::span<const UnimplementedKey> UnimplementedKeys();

}  // namespace dslaunch::runtime::internal
