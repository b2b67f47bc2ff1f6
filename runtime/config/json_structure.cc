#include "runtime/config/json_structure.h"

#include <map>
#include <vector>

#include <nlohmann/json.hpp>

namespace dslaunch::runtime::internal {
namespace {

// One open object or array.
struct Frame {
  bool array = false;
  size_t index = 0;         // array: the element being read
  std::string key;          // object: the key of the value being read
  bool expect_key = true;   // object: the next string is a key
  std::map<std::string, TextPosition> keys;  // object: keys seen, where
};

// "$" and one selector per open container: ".key" or "[index]".
std::string PathOf(const std::vector<Frame>& frames) {
  std::string path = "$";
  for (const Frame& f : frames) path += f.array ? "[" + std::to_string(f.index) + "]" : "." + f.key;
  return path;
}

// A key as the parser will see it: escapes decoded (the raw text when it does not decode; the
// real parser then reports the syntax error).
std::string DecodeKey(std::string_view raw) {
  if (raw.find('\\') == std::string_view::npos) return std::string(raw);
  try {
    return nlohmann::json::parse("\"" + std::string(raw) + "\"").get<std::string>();
  } catch (const std::exception&) {
    return std::string(raw);
  }
}

}  // namespace

JsonStructure ScanJsonStructure(std::string_view text, int max_depth) {
  JsonStructure out;
  std::vector<Frame> frames;
  TextPosition pos;
  auto advance = [&](char c) {
    if (c == '\n') {
      ++pos.line;
      pos.column = 1;
    } else {
      ++pos.column;
    }
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      const TextPosition start = pos;
      advance(c);
      size_t end = i + 1;
      while (end < text.size() && text[end] != '"') {
        if (text[end] == '\\' && end + 1 < text.size()) {
          advance(text[end]);
          ++end;
        }
        advance(text[end]);
        ++end;
      }
      if (!frames.empty() && !frames.back().array && frames.back().expect_key) {
        Frame& top = frames.back();
        std::string key = DecodeKey(text.substr(i + 1, end - i - 1));
        auto [it, inserted] = top.keys.emplace(key, start);
        top.key = std::move(key);
        top.expect_key = false;
        if (!inserted && !out.duplicate_at) {
          out.duplicate_at = start;
          out.duplicate_first_at = it->second;
          out.duplicate_path = PathOf(frames);
        }
      }
      if (end < text.size()) advance(text[end]);  // the closing quote
      i = end;
      continue;
    }
    if (c == '{' || c == '[') {
      if (static_cast<int>(frames.size()) >= max_depth) {
        out.too_deep_at = pos;
        out.too_deep_path = PathOf(frames);
        return out;
      }
      frames.push_back(Frame{c == '[', 0, "", true, {}});
    } else if ((c == '}' || c == ']') && !frames.empty()) {
      frames.pop_back();
    } else if (c == ',' && !frames.empty()) {
      if (frames.back().array) {
        ++frames.back().index;
      } else {
        frames.back().expect_key = true;
      }
    }
    advance(c);
  }
  return out;
}

}  // namespace dslaunch::runtime::internal
