#include "common/cpu_list.h"

#include <charconv>

namespace dslaunch {
namespace {

std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }

// A CPU id: decimal digits only (no sign, no spaces), below kMaxCpuId.
Result<int> ParseCpuId(std::string_view item, std::string_view digits) {
  int value = 0;
  const char* end = digits.data() + digits.size();
  auto [ptr, ec] = std::from_chars(digits.data(), end, value);
  const bool all_digits = !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos;
  if (!all_digits || ptr != end) return InvalidArgumentError(Quote(item) + ": not a CPU number");
  if (ec != std::errc() || value >= kMaxCpuId) {
    return InvalidArgumentError(Quote(item) + ": CPU " + std::string(digits) + " is beyond the largest CPU id " +
                                std::to_string(kMaxCpuId - 1));
  }
  return value;
}

}  // namespace

Result<std::vector<int>> ParseCpuList(std::string_view text) {
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  std::vector<int> cpus;
  if (text.empty()) return cpus;
  std::string_view previous;
  while (true) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    if (item.empty()) return InvalidArgumentError("empty item (two commas, or a comma at an end)");
    const size_t dash = item.find('-');
    DSLAUNCH_ASSIGN_OR_RETURN(int first, ParseCpuId(item, item.substr(0, dash)));
    int last = first;
    if (dash != std::string_view::npos) {
      DSLAUNCH_ASSIGN_OR_RETURN(last, ParseCpuId(item, item.substr(dash + 1)));
      if (last < first) return InvalidArgumentError(Quote(item) + ": the range ends below its start");
    }
    if (!cpus.empty() && first <= cpus.back()) {
      return InvalidArgumentError(Quote(item) + " after " + Quote(previous) +
                                  ": items must be ascending and must not overlap");
    }
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
    previous = item;
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return cpus;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace dslaunch
