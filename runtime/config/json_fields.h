// Internal to the train.json parser (train_config*.cc): typed, path-tracking access to the keys of
// one JSON object. Not part of the runtime's API; it is the only header that includes nlohmann_json,
// and only the train_config translation units include it.
#pragma once

#include <cstdint>
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

namespace dslaunch::runtime {
struct ConfigKeys;  // train_config.h
}  // namespace dslaunch::runtime

namespace dslaunch::runtime::internal {

using Json = nlohmann::json;

// Shared by every Section of one parse: which file a JSON path came from, and where unimplemented
// keys, warnings and errors are collected. `inline_doc` is the train.json as written; a path absent
// from it came from the referenced DeepSpeed config (`referenced_file`).
struct ParseContext {
  std::string main_file;
  std::string referenced_file;
  const Json* inline_doc = nullptr;
  std::vector<std::string>* unimplemented = nullptr;
  std::vector<std::string>* warnings = nullptr;  // accepted with a warning (a deprecated form)
  // Every error found so far, each a whole message "<file>: <JSON path>: <problem>": the parse
  // goes on past an error so that one run reports them all (docs/train-json.md, "Errors").
  std::vector<std::string>* errors = nullptr;
  // When set, every key a getter or Known() asks for, present or not, and apart from them the
  // recognised-but-unimplemented keys that Unimplemented() looks for (ConfigKeysRead).
  ConfigKeys* keys_read = nullptr;
};

// "$.a.b" with `key` appended.
std::string ChildPath(const std::string& path, std::string_view key);
// The closest of `candidates` to `word` when it is close enough to be a likely typo, else ""
// (always "" for a word over 64 characters: no name of the schema is that long).
std::string Suggest(std::string_view word, const std::vector<std::string>& candidates);
// The value as JSON text, shortened for messages.
std::string Describe(const Json& value);

// One JSON object and its path. Every getter records its key as known, whether present or not, so
// Finish() can report the keys nobody asked for. Getters leave *out untouched when the key is
// absent or its value is wrong; a wrong value is reported to the context's errors and the getter
// returns false (true when the key is absent or valid), so that parsing goes on to the next key.
class Section {
 public:
  Section(const ParseContext* ctx, const Json* object, std::string path, Json::json_pointer pointer)
      : ctx_(ctx), object_(object), path_(std::move(path)), pointer_(std::move(pointer)) {}

  const std::string& path() const { return path_; }
  bool Has(std::string_view key) const { return object_->contains(std::string(key)); }
  // Whether `key` is present and holds true or false (for keys with an old boolean form).
  bool HoldsBool(std::string_view key) const;

  bool Int(std::string_view key, int64_t min, int64_t max, int64_t* out);
  bool Int(std::string_view key, int64_t min, int64_t max, int* out);
  // An integer as Int, or the string "auto" (*out unchanged). *source says which, or kDefault when
  // the key is absent (runtime/config/buffer_keys.h).
  bool IntOrAuto(std::string_view key, int64_t min, int64_t max, int64_t* out, KeySource* source);
  bool OptionalInt(std::string_view key, int64_t min, int64_t max, std::optional<int64_t>* out);
  bool Double(std::string_view key, double min, double max, double* out);
  bool Bool(std::string_view key, bool* out);
  bool String(std::string_view key, std::string* out);
  // A string matched (case-insensitively when asked) against `names`; *out is the index.
  bool Choice(std::string_view key, const std::vector<std::string>& names, bool ignore_case, size_t* out);
  bool IntArray(std::string_view key, int64_t min, int64_t max, std::vector<int64_t>* out);
  // Exactly `size` numbers in [min, max], or [min, max) with `max_exclusive`; `hint` (e.g. the
  // usual values) ends the message of a number out of range.
  bool DoubleArray(std::string_view key, size_t size, double min, double max, std::vector<double>* out,
                     bool max_exclusive = false, std::string_view hint = "");
  // The object under `key`, or nullopt when absent; an error when it is not an object.
  Result<std::optional<Section>> Child(std::string_view key);
  // The keys of this section in the table of DeepSpeed keys that this runtime ignores
  // (unimplemented_keys.h): recorded as known, and when present their path is added to the
  // context's unimplemented list. `table_section` names the table's section when it differs from
  // this one's path (the "bfloat16" spelling of "$.bf16").
  void Unimplemented(std::string_view table_section = "");
  // Records a key as known without reading it (the caller reads it some other way).
  void Known(std::string_view key) { Record(key, true); }
  // The keys that no getter asked for: one that is a likely typo of a known key of this section
  // (within the edit distance of Suggest) is an error with the suggestion; any other is a warning,
  // "unknown key, ignored", as DeepSpeed ignores keys it does not know.
  void Finish() const;

  // Adds a failed status's message to the context's errors; returns status.ok().
  bool Report(const Status& status) const;
  // How many errors the whole parse has found so far: a section compares it before and after its
  // getters to skip checks between keys (validators) that a wrong value would only confuse.
  size_t ErrorCount() const { return ctx_->errors == nullptr ? 0 : ctx_->errors->size(); }

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
  // Records `key` as known to this section and, when the context asks, its path as read.
  void Record(std::string_view key, bool implemented);
  std::string FileFor(const Json::json_pointer& pointer) const;

  const ParseContext* ctx_;
  const Json* object_;
  std::string path_;
  Json::json_pointer pointer_;
  std::set<std::string> known_;
};

inline constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();

}  // namespace dslaunch::runtime::internal
