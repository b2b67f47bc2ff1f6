#include "runtime/swap/swap_file_name.h"

#include <charconv>

namespace dslaunch::runtime::swap {
namespace {

constexpr std::string_view kRankTag = ".rank";
constexpr std::string_view kPidTag = ".pid";
constexpr std::string_view kSuffix = ".swp";

// Consumes a decimal number without sign or leading zeros from the front of `s`.
template <typename T>
std::optional<T> TakeNumber(std::string_view& s) {
  size_t n = 0;
  while (n < s.size() && s[n] >= '0' && s[n] <= '9') ++n;
  if (n == 0 || (n > 1 && s[0] == '0')) return std::nullopt;
  T value{};
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + n, value);
  if (ec != std::errc() || ptr != s.data() + n) return std::nullopt;
  s.remove_prefix(n);
  return value;
}

bool TakePrefix(std::string_view& s, std::string_view prefix) {
  if (!s.starts_with(prefix)) return false;
  s.remove_prefix(prefix.size());
  return true;
}

}  // namespace

std::string_view SwapKindName(SwapKind kind) { return kind == SwapKind::kOptimizer ? "optimizer" : "param"; }

std::string SwapDirectory(const std::string& nvme_path) {
  std::string dir = nvme_path;
  if (!dir.empty() && dir.back() != '/') dir += '/';
  return dir + std::string(kSwapDirectoryName);
}

std::string FormatSwapFileName(const SwapFileName& n) {
  return std::string(SwapKindName(n.kind)) + std::string(kRankTag) + std::to_string(n.rank) + std::string(kPidTag) +
         std::to_string(n.pid) + std::string(kSuffix);
}

std::optional<SwapFileName> ParseSwapFileName(std::string_view s) {
  SwapFileName n;
  if (TakePrefix(s, SwapKindName(SwapKind::kOptimizer))) {
    n.kind = SwapKind::kOptimizer;
  } else if (TakePrefix(s, SwapKindName(SwapKind::kParam))) {
    n.kind = SwapKind::kParam;
  } else {
    return std::nullopt;
  }
  if (!TakePrefix(s, kRankTag)) return std::nullopt;
  auto rank = TakeNumber<int>(s);
  if (!rank || !TakePrefix(s, kPidTag)) return std::nullopt;
  auto pid = TakeNumber<long>(s);
  if (!pid || s != kSuffix) return std::nullopt;
  n.rank = *rank;
  n.pid = *pid;
  return n;
}

}  // namespace dslaunch::runtime::swap
