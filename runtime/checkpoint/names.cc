#include "runtime/checkpoint/names.h"

#include <charconv>
#include <filesystem>
#include <limits>
#include <cstdio>

namespace dslaunch::runtime {
namespace {

constexpr std::string_view kStepPrefix = "global_step";
constexpr std::string_view kShardPrefix = "rank";
constexpr std::string_view kShardSuffix = ".safetensors";
constexpr std::string_view kTemporarySuffix = ".tmp";
// Shard files name their rank in at least this many digits, so that they sort by rank.
constexpr int kShardRankDigits = 5;

// A non-negative decimal number that is exactly `digits`: no sign, no spaces, no overflow.
std::optional<int64_t> ParseDigits(std::string_view digits) {
  if (digits.empty()) return std::nullopt;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  int64_t value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return value;
}

}  // namespace

std::string StepDirectoryName(int64_t step) { return std::string(kStepPrefix) + std::to_string(step); }

std::optional<int64_t> ParseStepDirectoryName(std::string_view name) {
  if (!name.starts_with(kStepPrefix)) return std::nullopt;
  const std::string_view digits = name.substr(kStepPrefix.size());
  if (digits.size() > 1 && digits.front() == '0') return std::nullopt;  // would not round-trip
  return ParseDigits(digits);
}

std::string ShardFileName(int rank) {
  char digits[24];
  std::snprintf(digits, sizeof(digits), "%0*d", kShardRankDigits, rank);
  return std::string(kShardPrefix) + digits + std::string(kShardSuffix);
}

std::optional<int> ParseShardFileName(std::string_view name) {
  if (!name.starts_with(kShardPrefix) || !name.ends_with(kShardSuffix)) return std::nullopt;
  const std::string_view digits =
      name.substr(kShardPrefix.size(), name.size() - kShardPrefix.size() - kShardSuffix.size());
  const std::optional<int64_t> rank = ParseDigits(digits);
  if (!rank || *rank > std::numeric_limits<int>::max() || ShardFileName(static_cast<int>(*rank)) != name) return std::nullopt;
  return static_cast<int>(*rank);
}

std::string LatestFileText(int64_t step) { return StepDirectoryName(step) + "\n"; }

std::optional<std::string> ParseLatestFileText(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text.empty() || text.find('/') != std::string_view::npos) return std::nullopt;
  return std::string(text);
}

std::string TemporaryFileName(std::string_view name) { return std::string(name) + std::string(kTemporarySuffix); }

std::string PathIn(const std::string& dir, std::string_view name) {
  return (std::filesystem::path(dir) / name).string();
}

}  // namespace dslaunch::runtime
