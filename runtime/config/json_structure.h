// Internal to the train.json parser: one linear pass over the raw text of a JSON document that
// finds what nlohmann_json accepts but a config must not have (docs/train-json.md, "Errors"):
// nesting deeper than a limit, and a key repeated within one object. It runs before the document
// is parsed into a DOM, keeps only a stack as deep as the limit, and never recurses, so hostile
// input (100,000 nested brackets) costs time linear in its size and no stack.
//
// The pass does not validate syntax: on malformed text its findings about duplicates are
// meaningless, so the caller reports syntax errors (from the real parser) first and duplicates
// only for a document that parsed. The depth finding is reliable on any text: it counts brackets
// outside strings.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace dslaunch::runtime::internal {

// A DeepSpeed config nests 4 levels at most ($.zero_optimization.offload_optimizer.device); 64
// leaves room for any config while keeping the recursive parts of the parser (copying, merging,
// printing a value) a few kilobytes of stack deep.
inline constexpr int kMaxJsonDepth = 64;

// Where in the text: 1-based line and column (in bytes).
struct TextPosition {
  size_t line = 1;
  size_t column = 1;
};

struct JsonStructure {
  // The first bracket that opens level max_depth + 1, with the JSON path of the value it opens.
  std::optional<TextPosition> too_deep_at;
  std::string too_deep_path;
  // The first key that repeats a key of the same object: its path, where it is, and where the
  // first occurrence is.
  std::optional<TextPosition> duplicate_at;
  std::optional<TextPosition> duplicate_first_at;
  std::string duplicate_path;
};

// Scans `text` (stops at the first bracket past `max_depth`). Pure; never throws.
JsonStructure ScanJsonStructure(std::string_view text, int max_depth);

}  // namespace dslaunch::runtime::internal
