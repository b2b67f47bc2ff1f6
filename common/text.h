// Small pure helpers on text shared by the command-line and config parsers and the programs' edges.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace dslaunch {

// Levenshtein distance (insertions, deletions, substitutions each cost 1), for "did you mean".
size_t EditDistance(std::string_view a, std::string_view b);

// "NAME=VALUE" entries of a NUL-terminated array (a process's `environ`) as a map. Entries without
// '=' are skipped; of duplicate names the first wins, as with getenv. Read the environment once, at a program's edge, and pass the map on.
std::map<std::string, std::string> EnvironmentMap(const char* const* entries);

// A JSON number with 9 significant digits; "null" for inf and NaN, which JSON cannot hold.
std::string JsonNumber(double v);

// `text` as a JSON string literal, with its quotes: '"', '\\' and control characters escaped,
// other bytes (UTF-8) as they are.
std::string JsonString(std::string_view text);

// `parts` with `separator` between them: {"a", "b"}, ", " -> "a, b"; "" for none.
std::string JoinText(const std::vector<std::string>& parts, std::string_view separator);

// `text` with ASCII letters in lower case ("GPipe" -> "gpipe"): names read case-insensitively.
std::string LowerAscii(std::string_view text);

// `text` in single quotes, as messages quote a value: "abc" -> "'abc'" (nothing escaped).
std::string SingleQuoted(std::string_view text);

// `text` cut at every `separator`: "a:b::c" -> {"a", "b", "", "c"}; "" -> {""}. JoinText's inverse.
std::vector<std::string> SplitText(std::string_view text, char separator);

// A duration for people, in seconds with one decimal: 10400 ms -> "10.4 s".
std::string FormatSeconds(std::chrono::milliseconds d);

}  // namespace dslaunch
