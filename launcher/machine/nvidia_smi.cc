#include "launcher/machine/nvidia_smi.h"

#include <charconv>
#include <string>

namespace dslaunch::launcher {
namespace {

constexpr std::string_view kGpuPrefix = "GPU ";
// The most of the output quoted in an error: one line of nvidia-smi's, not a page of anything.
constexpr size_t kMaxQuotedChars = 200;

std::string FirstLine(std::string_view output) {
  while (!output.empty() && (output.front() == '\n' || output.front() == ' ')) output.remove_prefix(1);
  std::string_view line = output.substr(0, output.find('\n'));
  if (line.size() > kMaxQuotedChars) return std::string(line.substr(0, kMaxQuotedChars)) + "...";
  return line.empty() ? std::string("no output") : "'" + std::string(line) + "'";
}

// The index of a line "GPU <index>: ...", if it is one.
std::optional<int> GpuIndex(std::string_view line) {
  if (!line.starts_with(kGpuPrefix)) return std::nullopt;
  line.remove_prefix(kGpuPrefix.size());
  int index = 0;
  auto [ptr, ec] = std::from_chars(line.data(), line.data() + line.size(), index);
  if (ec != std::errc() || ptr == line.data() || ptr == line.data() + line.size() || *ptr != ':') return std::nullopt;
  return index;
}

}  // namespace

Result<int> CountNvidiaSmiGpus(int exit_code, std::string_view output) {
  if (output.find(kNvidiaSmiNoDevices) != std::string_view::npos) return 0;
  if (exit_code != 0) {
    return UnavailableError("nvidia-smi -L exited with code " + std::to_string(exit_code) + ": " + FirstLine(output));
  }
  int count = 0;
  std::string_view rest = output;
  while (!rest.empty()) {
    const size_t newline = rest.find('\n');
    const std::string_view line = rest.substr(0, newline);
    rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
    std::optional<int> index = GpuIndex(line);
    if (!index) continue;
    if (*index != count) {
      return UnavailableError("nvidia-smi -L listed GPU " + std::to_string(*index) + " where GPU " +
                              std::to_string(count) + " was expected: '" + std::string(line) + "'");
    }
    ++count;
  }
  if (count == 0) return UnavailableError("nvidia-smi -L listed no GPU: " + FirstLine(output));
  return count;
}

}  // namespace dslaunch::launcher
