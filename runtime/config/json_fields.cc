#include "runtime/config/json_fields.h"

#include "common/text.h"
#include "runtime/config/train_config.h"
#include "runtime/config/unimplemented_keys.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace dslaunch::runtime::internal {
namespace {

// Longest JSON excerpt quoted in an error message.
constexpr size_t kMaxDescribedChars = 40;
// Largest edit distance still suggested for short keys; longer keys allow a third of their length.
constexpr size_t kMinSuggestDistance = 2;
// Longer than any key or value name of the schema (the longest has 41 characters): a longer word
// gets no suggestion. The edit distance costs the product of the lengths, so a hostile key of
// megabytes must not reach it.
constexpr size_t kMaxSuggestedWord = 64;

std::string RangeText(int64_t min, int64_t max) {
  // Int fields cap kNoMax at INT_MAX; either way there is no upper bound worth printing.
  if (max >= std::numeric_limits<int>::max()) return ">= " + std::to_string(min);
  return std::to_string(min) + "-" + std::to_string(max);
}

std::string NumberText(double v) {
  std::string s = Json(v).dump();
  return s;
}

// An integer from an integer or an integral float (DeepSpeed configs write sizes as 5e8).
std::optional<int64_t> AsInt(const Json& v) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(kNoMax)) return std::nullopt;
    return v.get<int64_t>();
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

// Hint for the HF Trainer's placeholder, which only its integration resolves.
std::string AutoHint(const Json& v) {
  return v.is_string() && v.get<std::string>() == "auto" ? " (\"auto\" is resolved only by the HF Trainer)"
                                                         : "";
}

}  // namespace

std::string ChildPath(const std::string& path, std::string_view key) { return path + "." + std::string(key); }

std::string Suggest(std::string_view word, const std::vector<std::string>& candidates) {
  if (word.size() > kMaxSuggestedWord) return "";
  std::string best;
  size_t best_d = std::string::npos;
  std::string lower = LowerAscii(word);
  for (const std::string& c : candidates) {
    size_t d = EditDistance(lower, LowerAscii(c));
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  if (best.empty() || best_d > std::max(kMinSuggestDistance, word.size() / 3)) return "";
  return best;
}

std::string Describe(const Json& value) {
  std::string s = value.dump();
  if (s.size() > kMaxDescribedChars) s = s.substr(0, kMaxDescribedChars - 3) + "...";
  return s;
}

void Section::Record(std::string_view key, bool implemented) {
  known_.insert(std::string(key));
  if (ctx_->keys_read == nullptr) return;
  (implemented ? ctx_->keys_read->implemented : ctx_->keys_read->unimplemented).insert(ChildPath(path_, key));
}

const Json* Section::Find(std::string_view key) {
  Record(key, true);
  auto it = object_->find(std::string(key));
  return it == object_->end() ? nullptr : &*it;
}

std::string Section::FileFor(const Json::json_pointer& pointer) const {
  if (ctx_->referenced_file.empty() || ctx_->inline_doc == nullptr) return ctx_->main_file;
  return ctx_->inline_doc->contains(pointer) ? ctx_->main_file : ctx_->referenced_file;
}

Status Section::Error(std::string_view key, std::string_view message) const {
  return InvalidArgumentError(FileFor(pointer_ / std::string(key)) + ": " + ChildPath(path_, key) + ": " +
                              std::string(message));
}

Status Section::Validated(const Status& status) const {
  if (status.ok()) return status;
  const std::string& message = status.message();
  const size_t colon = message.find(": ");
  if (colon == std::string::npos) return InvalidArgumentError(FileFor(pointer_) + ": " + message);
  const std::string key_path = message.substr(0, colon);
  // "a.b[2]" -> the pointer /a/b/2, to find which file the key came from.
  Json::json_pointer pointer = pointer_;
  std::string token;
  for (char c : key_path + ".") {
    if (c == '.' || c == '[' || c == ']') {
      if (!token.empty()) pointer /= token;
      token.clear();
    } else {
      token += c;
    }
  }
  return InvalidArgumentError(FileFor(pointer) + ": " + ChildPath(path_, key_path) + message.substr(colon));
}

void Section::Warn(std::string_view key, std::string_view message) const {
  if (ctx_->warnings == nullptr) return;
  ctx_->warnings->push_back(FileFor(pointer_ / std::string(key)) + ": " + ChildPath(path_, key) + ": " +
                            std::string(message));
}

bool Section::HoldsBool(std::string_view key) const {
  auto it = object_->find(std::string(key));
  return it != object_->end() && it->is_boolean();
}

Status Section::SelfError(std::string_view message) const {
  return InvalidArgumentError(FileFor(pointer_) + ": " + path_ + ": " + std::string(message));
}

bool Section::Int(std::string_view key, int64_t min, int64_t max, int64_t* out) {
  const Json* v = Find(key);
  if (v == nullptr) return true;
  std::optional<int64_t> i = AsInt(*v);
  if (!i || *i < min || *i > max) {
    return Report(Error(key, "expected an integer " + RangeText(min, max) + ", got " + Describe(*v) + AutoHint(*v)));
  }
  *out = *i;
  return true;
}

bool Section::Int(std::string_view key, int64_t min, int64_t max, int* out) {
  int64_t wide = *out;
  if (!Int(key, min, std::min<int64_t>(max, std::numeric_limits<int>::max()), &wide)) return false;
  *out = static_cast<int>(wide);
  return true;
}

bool Section::IntOrAuto(std::string_view key, int64_t min, int64_t max, int64_t* out, KeySource* source) {
  const Json* v = Find(key);
  if (v == nullptr) {
    *source = KeySource::kDefault;
    return true;
  }
  if (v->is_string() && v->get_ref<const std::string&>() == "auto") {
    *source = KeySource::kAuto;
    return true;
  }
  std::optional<int64_t> i = AsInt(*v);
  if (!i || *i < min || *i > max) {
    return Report(Error(key, "expected an integer " + RangeText(min, max) + " or \"auto\", got " + Describe(*v)));
  }
  *out = *i;
  *source = KeySource::kExplicit;
  return true;
}

bool Section::OptionalInt(std::string_view key, int64_t min, int64_t max, std::optional<int64_t>* out) {
  if (!Has(key)) {
    Known(key);
    return true;
  }
  int64_t v = 0;
  if (!Int(key, min, max, &v)) return false;
  *out = v;
  return true;
}

bool Section::Double(std::string_view key, double min, double max, double* out) {
  const Json* v = Find(key);
  if (v == nullptr) return true;
  if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < min || v->get<double>() > max) {
    std::string range = max == std::numeric_limits<double>::max() ? ">= " + NumberText(min)
                                                                  : NumberText(min) + "-" + NumberText(max);
    return Report(Error(key, "expected a number " + range + ", got " + Describe(*v) + AutoHint(*v)));
  }
  *out = v->get<double>();
  return true;
}

bool Section::Bool(std::string_view key, bool* out) {
  const Json* v = Find(key);
  if (v == nullptr) return true;
  if (!v->is_boolean()) return Report(Error(key, "expected true or false, got " + Describe(*v) + AutoHint(*v)));
  *out = v->get<bool>();
  return true;
}

bool Section::String(std::string_view key, std::string* out) {
  const Json* v = Find(key);
  if (v == nullptr) return true;
  if (!v->is_string()) return Report(Error(key, "expected a string, got " + Describe(*v)));
  *out = v->get<std::string>();
  return true;
}

bool Section::Choice(std::string_view key, const std::vector<std::string>& names, bool ignore_case,
                       size_t* out) {
  const Json* v = Find(key);
  if (v == nullptr) return true;
  std::string expected;
  for (const std::string& n : names) expected += (expected.empty() ? "" : ", ") + n;
  if (!v->is_string()) return Report(Error(key, "expected one of " + expected + ", got " + Describe(*v)));
  std::string given = v->get<std::string>();
  for (size_t i = 0; i < names.size(); ++i) {
    if (ignore_case ? LowerAscii(given) == LowerAscii(names[i]) : given == names[i]) {
      *out = i;
      return true;
    }
  }
  std::string hint = Suggest(given, names);
  return Report(Error(key, "expected one of " + expected + ", got " + Describe(*v) +
                        (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)")));
}

bool Section::IntArray(std::string_view key, int64_t min, int64_t max, std::vector<int64_t>* out) {
  const Json* v = Find(key);
  if (v == nullptr) return true;
  if (!v->is_array()) return Report(Error(key, "expected an array of integers, got " + Describe(*v)));
  std::vector<int64_t> values;
  for (size_t i = 0; i < v->size(); ++i) {
    std::optional<int64_t> x = AsInt((*v)[i]);
    if (!x || *x < min || *x > max) {
      return Report(Error(std::string(key) + "[" + std::to_string(i) + "]",
                   "expected an integer " + RangeText(min, max) + ", got " + Describe((*v)[i])));
    }
    values.push_back(*x);
  }
  *out = std::move(values);
  return true;
}

bool Section::DoubleArray(std::string_view key, size_t size, double min, double max,
                            std::vector<double>* out, bool max_exclusive, std::string_view hint) {
  const Json* v = Find(key);
  if (v == nullptr) return true;
  if (!v->is_array() || v->size() != size) {
    return Report(Error(key, "expected an array of " + std::to_string(size) + " numbers, got " + Describe(*v)));
  }
  std::vector<double> values;
  for (size_t i = 0; i < size; ++i) {
    const Json& x = (*v)[i];
    if (!x.is_number() || x.get<double>() < min || x.get<double>() > max ||
        (max_exclusive && x.get<double>() == max)) {
      const std::string range = max_exclusive ? ">= " + NumberText(min) + " and < " + NumberText(max)
                                              : NumberText(min) + "-" + NumberText(max);
      return Report(Error(std::string(key) + "[" + std::to_string(i) + "]",
                   "expected a number " + range + ", got " + Describe(x) + std::string(x.is_number() ? hint : "")));
    }
    values.push_back(x.get<double>());
  }
  *out = std::move(values);
  return true;
}

Result<std::optional<Section>> Section::Child(std::string_view key) {
  const Json* v = Find(key);
  if (v == nullptr) return std::optional<Section>();
  if (!v->is_object()) return Error(key, "expected an object, got " + Describe(*v));
  return std::optional<Section>(Section(ctx_, v, ChildPath(path_, key), pointer_ / std::string(key)));
}

void Section::Unimplemented(std::string_view table_section) {
  const std::string_view section = table_section.empty() ? std::string_view(path_) : table_section;
  for (const UnimplementedKey& entry : UnimplementedKeys()) {
    if (entry.section != section) continue;
    Record(entry.key, false);
    auto found = object_->find(std::string(entry.key));
    if (found == object_->end()) continue;
    const Json* v = &*found;
    if (!entry.only.empty() && *v != Json::parse(entry.only)) {
      Report(Error(entry.key, "not implemented here, and " + Describe(*v) +
                                  " would change the training; remove the key or give DeepSpeed's default, " +
                                  std::string(entry.only)));
      continue;
    }
    if (ctx_->unimplemented != nullptr) ctx_->unimplemented->push_back(ChildPath(path_, entry.key));
  }
}

bool Section::Report(const Status& status) const {
  if (status.ok()) return true;
  if (ctx_->errors != nullptr) ctx_->errors->push_back(std::string(status.message()));
  return false;
}

void Section::Finish() const {
  std::vector<std::string> candidates(known_.begin(), known_.end());
  for (auto it = object_->begin(); it != object_->end(); ++it) {
    if (known_.count(it.key()) != 0) continue;
    if (it.key().size() > kMaxSuggestedWord) {  // shown shortened: it may be megabytes long
      if (ctx_->warnings != nullptr) {
        ctx_->warnings->push_back(FileFor(pointer_ / it.key()) + ": " +
                                  ChildPath(path_, it.key().substr(0, kMaxDescribedChars - 3) + "...") +
                                  ": unknown key, ignored");
      }
      continue;
    }
    // A near miss of a key this section knows is almost certainly that key mistyped: ignoring it
    // would silently train with the default the user meant to change.
    std::string hint = Suggest(it.key(), candidates);
    if (!hint.empty()) {
      Report(Error(it.key(), "unknown key (did you mean \"" + hint + "\"?)"));
    } else {
      Warn(it.key(), "unknown key, ignored (DeepSpeed ignores keys it does not know; check the spelling if it "
                     "was meant for dslaunch-worker)");
    }
  }
}

}  // namespace dslaunch::runtime::internal
