// Internal to the train.json parser (train_config*.cc): typed, path-tracking access to the keys of
// one JSON object. Not part of the runtime's API; it is the only header that includes nlohmann_json,
// and only the train_config translation units include it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "runtime/config/buffer_keys.h"

namespace dslaunch::runtime::internal {

using Json = nlohmann::json;

// Shared by every Section of one parse: which file a JSON path came from, and where unimplemented
// keys are collected. `inline_doc` is the train.json as written; a path absent from it came from
// the referenced DeepSpeed config (`referenced_file`).
struct ParseContext {
  std::string main_file;
  std::string referenced_file;
  const Json* inline_doc = nullptr;
  std::vector<std::string>* unimplemented = nullptr;
  std::vector<std::string>* warnings = nullptr;  // accepted with a warning (a deprecated form)
};

// "$.a.b" with `key` appended.
std::string ChildPath(const std::string& path, std::string_view key);
// The closest of `candidates` to `word` when it is close enough to be a likely typo, else ""
// (always "" for a word over 64 characters: no name of the schema is that long).
std::string Suggest(std::string_view word, const std::vector<std::string>& candidates);
// The value as JSON text, shortened for messages.
std::string Describe(const Json& value);

// One JSON object and its path. Every getter records its key as known, whether present or not, so
// Finish() can report the keys nobody asked for. Getters leave *out untouched when the key is absent.
class Section {
 public:
  Section(const ParseContext* ctx, const Json* object, std::string path, Json::json_pointer pointer)
      : ctx_(ctx), object_(object), path_(std::move(path)), pointer_(std::move(pointer)) {}

  const std::string& path() const { return path_; }
  bool Has(std::string_view key) const { return object_->contains(std::string(key)); }
  // Whether `key` is present and holds true or false (for keys with an old boolean form).
  bool HoldsBool(std::string_view key) const;

  Status Int(std::string_view key, int64_t min, int64_t max, int64_t* out);
  Status Int(std::string_view key, int64_t min, int64_t max, int* out);
  // An integer as Int, or the string "auto" (*out unchanged). *source says which, or kDefault when
  // the key is absent (runtime/config/buffer_keys.h).
  Status IntOrAuto(std::string_view key, int64_t min, int64_t max, int64_t* out, KeySource* source);
  Status OptionalInt(std::string_view key, int64_t min, int64_t max, std::optional<int64_t>* out);
  Status Double(std::string_view key, double min, double max, double* out);
  Status Bool(std::string_view key, bool* out);
  Status String(std::string_view key, std::string* out);
  // A string matched (case-insensitively when asked) against `names`; *out is the index.
  Status Choice(std::string_view key, const std::vector<std::string>& names, bool ignore_case, size_t* out);
  Status IntArray(std::string_view key, int64_t min, int64_t max, std::vector<int64_t>* out);
  // Exactly `size` numbers in [min, max], or [min, max) with `max_exclusive`; `hint` (e.g. the
  // usual values) ends the message of a number out of range.
  Status DoubleArray(std::string_view key, size_t size, double min, double max, std::vector<double>* out,
                     bool max_exclusive = false, std::string_view hint = "");
  // The object under `key`, or nullopt when absent; an error when it is not an object.
  Result<std::optional<Section>> Child(std::string_view key);
  // Keys DeepSpeed defines that this runtime ignores: recorded as known, and when present their path
  // is added to the context's unimplemented list.
  void Unimplemented(std::initializer_list<std::string_view> keys);
  // Records a key as known without reading it (the caller reads it some other way).
  void Known(std::string_view key) { known_.insert(std::string(key)); }
  // kInvalidArgument for the first key that no getter asked for, with a suggestion when close.
  Status Finish() const;

  // "<file>: <path>.<key>: <message>", naming the file the key came from.
  Status Error(std::string_view key, std::string_view message) const;
  // "<file>: <path>: <message>".
  Status SelfError(std::string_view message) const;
  // A config type's validator result (e.g. ValidateLrSchedule) as this parser's error. The
  // validator's message is "<dotted key path>: <problem>" with the path relative to this section
  // ("scheduler.params.warmup_num_steps", "model.layers[2]" from the root); returns
  // "<file>: <path>.<dotted key path>: <problem>", naming the file the key came from. OK stays OK;
  // a message without that shape is returned with only the file as context.
  Status Validated(const Status& status) const;
  // Adds "<file>: <path>.<key>: <message>" to the context's warnings.
  void Warn(std::string_view key, std::string_view message) const;

 private:
  const Json* Find(std::string_view key);
  std::string FileFor(const Json::json_pointer& pointer) const;

  const ParseContext* ctx_;
  const Json* object_;
  std::string path_;
  Json::json_pointer pointer_;
  std::set<std::string> known_;
};

inline constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();

}  // namespace dslaunch::runtime::internal
