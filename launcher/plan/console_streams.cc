#include "launcher/plan/console_streams.h"

#include <cctype>
#include <charconv>
#include <string>

namespace dslaunch::launcher {
namespace {

// The largest local rank the options may name: far beyond any node's workers (1024, hostfile.md),
// and small enough that no number overflows.
constexpr int kMaxLocalRank = 1 << 20;

std::optional<int> Number(std::string_view text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < 0) return std::nullopt;
  return value;
}

std::optional<StdStreams> Streams(std::string_view text) {
  std::optional<int> n = Number(text);
  if (!n || *n > static_cast<int>(StdStreams::kBoth)) return std::nullopt;
  return static_cast<StdStreams>(*n);
}

bool Has(StdStreams streams, control::Stream stream) {
  return (static_cast<uint8_t>(streams) & static_cast<uint8_t>(stream)) != 0;
}

}  // namespace

StdStreams StdStreamsSpec::For(int local_rank) const {
  if (by_local_rank.empty()) return all;
  auto it = by_local_rank.find(local_rank);
  return it == by_local_rank.end() ? StdStreams::kNone : it->second;
}

Result<StdStreamsSpec> ParseStdStreams(std::string_view option, std::string_view text) {
  const std::string bad = std::string(option) + " '" + std::string(text) +
                          "': expected 0 (none), 1 (stdout), 2 (stderr) or 3 (both), or LOCAL_RANK:N pairs "
                          "such as 0:3,1:2";
  StdStreamsSpec spec;
  if (text.find(':') == std::string_view::npos) {
    std::optional<StdStreams> all = Streams(text);
    if (!all) return InvalidArgumentError(bad);
    spec.all = *all;
    return spec;
  }
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const size_t colon = item.find(':');
    std::optional<int> rank = colon == std::string_view::npos ? std::nullopt : Number(item.substr(0, colon));
    std::optional<StdStreams> streams =
        colon == std::string_view::npos ? std::nullopt : Streams(item.substr(colon + 1));
    if (!rank || !streams || *rank > kMaxLocalRank) {
      return InvalidArgumentError(bad + " (at '" + std::string(item) + "')");
    }
    if (!spec.by_local_rank.emplace(*rank, *streams).second) {
      return InvalidArgumentError(std::string(option) + " '" + std::string(text) + "': local rank " +
                                  std::to_string(*rank) + " is given twice");
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return spec;
}

bool LooksLikeStdStreams(std::string_view text) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text.front()))) return false;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != ':' && c != ',') return false;
  }
  return true;
}

Result<std::set<int>> ParseLocalRanks(std::string_view text) {
  std::set<int> ranks;
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    std::optional<int> rank = Number(item);
    if (!rank || *rank > kMaxLocalRank) {
      return InvalidArgumentError("--local_ranks_filter '" + std::string(text) + "': '" + std::string(item) +
                                  "' is not a local rank; expected local ranks such as 0 or 0,1,3");
    }
    ranks.insert(*rank);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return ranks;
}

bool ConsoleStreams::Shows(int local_rank, control::Stream stream) const {
  if (local_ranks && local_ranks->count(local_rank) == 0) return false;
  return !Has(redirects.For(local_rank), stream) || Has(tee.For(local_rank), stream);
}

bool ConsoleStreams::ShowsNothing() const {
  if (!redirects.by_local_rank.empty() || redirects.all != StdStreams::kBoth) return false;
  if (tee.all != StdStreams::kNone) return false;
  for (const auto& [rank, streams] : tee.by_local_rank) {
    if (streams != StdStreams::kNone) return false;
  }
  return true;
}

}  // namespace dslaunch::launcher
