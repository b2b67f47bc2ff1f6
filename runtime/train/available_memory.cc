#include "runtime/train/available_memory.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>

#include "common/file_io.h"

namespace dslaunch::runtime {
namespace {

// cgroup v1 reports "no limit" as a huge page-aligned number (2^63 - 4096 on x86-64); any limit
// this large is none.
constexpr double kNoLimitFrom = 1152921504606846976.0;  // 2^60 bytes

std::optional<double> ParseNumber(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text.front()))) return std::nullopt;
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<double> ParseMemAvailable(std::string_view meminfo) {
  constexpr std::string_view kKey = "MemAvailable:";
  size_t at = 0;
  while (at < meminfo.size()) {
    size_t end = meminfo.find('\n', at);
    if (end == std::string_view::npos) end = meminfo.size();
    std::string_view line = meminfo.substr(at, end - at);
    at = end + 1;
    if (line.substr(0, kKey.size()) != kKey) continue;
    line.remove_prefix(kKey.size());
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    const size_t unit = line.find(' ');
    std::optional<double> kb = ParseNumber(line.substr(0, unit));
    if (!kb || unit == std::string_view::npos || line.substr(unit + 1) != "kB") return std::nullopt;
    return *kb * 1024.0;
  }
  return std::nullopt;
}

std::optional<double> ParsePeakResident(std::string_view status) {
  constexpr std::string_view kKey = "VmHWM:";
  size_t at = 0;
  while (at < status.size()) {
    size_t end = status.find('\n', at);
    if (end == std::string_view::npos) end = status.size();
    std::string_view line = status.substr(at, end - at);
    at = end + 1;
    if (line.substr(0, kKey.size()) != kKey) continue;
    line.remove_prefix(kKey.size());
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    const size_t unit = line.find(' ');
    std::optional<double> kb = ParseNumber(line.substr(0, unit));
    if (!kb || unit == std::string_view::npos || line.substr(unit + 1) != "kB") return std::nullopt;
    return *kb * 1024.0;
  }
  return std::nullopt;
}

Result<double> ReadPeakResident() {
  DSLAUNCH_ASSIGN_OR_RETURN(std::string status, ReadFile("/proc/self/status"));
  std::optional<double> peak = ParsePeakResident(status);
  if (!peak) return InternalError("/proc/self/status: no VmHWM line");
  return *peak;
}

int ComputeThreads(const std::map<std::string, std::string>& env, int cpus) {
  auto positive = [&](const char* name) -> std::optional<int> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    std::optional<double> v = ParseNumber(it->second);
    if (!v || *v < 1 || *v > 1 << 20) return std::nullopt;
    return static_cast<int>(*v);
  };
  const int fallback = std::max(cpus, 1);
  const int omp = positive("OMP_NUM_THREADS").value_or(fallback);
  const int blas = positive("OPENBLAS_NUM_THREADS").value_or(omp);
  return omp + blas;
}

ProcessFootprint ReadProcessFootprint(const TrainConfig& config, const std::map<std::string, std::string>& env) {
  ProcessFootprint footprint;
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  footprint.compute_threads = ComputeThreads(env, cpus);
  for (const std::string* path : {&config.data.train, &config.data.val, &config.data.train_labels,
                                  &config.data.val_labels}) {
    if (path->empty()) continue;
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(*path, ec);
    if (ec) continue;
    footprint.data_bytes += static_cast<double>(bytes);
    footprint.largest_data_file = std::max(footprint.largest_data_file, static_cast<double>(bytes));
  }
  return footprint;
}

std::vector<CgroupPath> ParseMemoryCgroups(std::string_view text) {
  std::vector<CgroupPath> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    const size_t first = line.find(':');
    const size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    const std::string path(line.substr(second + 1));
    if (line.substr(0, first) == "0" && controllers.empty()) {
      out.push_back({path, true});
      continue;
    }
    for (size_t c = 0; c <= controllers.size();) {
      size_t comma = controllers.find(',', c);
      if (comma == std::string_view::npos) comma = controllers.size();
      if (controllers.substr(c, comma - c) == "memory") out.push_back({path, false});
      c = comma + 1;
    }
  }
  return out;
}

std::optional<double> CgroupRoom(std::string_view limit_text, std::string_view usage_text) {
  const std::optional<double> limit = ParseNumber(limit_text);
  const std::optional<double> usage = ParseNumber(usage_text);
  if (!limit || !usage || *limit >= kNoLimitFrom) return std::nullopt;
  return *limit > *usage ? *limit - *usage : 0.0;
}

Result<AvailableMemory> ReadAvailableMemory() {
  DSLAUNCH_ASSIGN_OR_RETURN(std::string meminfo, ReadFile("/proc/meminfo"));
  const std::optional<double> mem_available = ParseMemAvailable(meminfo);
  if (!mem_available) return InternalError("/proc/meminfo: no MemAvailable line");
  AvailableMemory best{*mem_available, "MemAvailable"};
  Result<std::string> cgroups = ReadFile("/proc/self/cgroup");
  if (!cgroups.ok()) return best;
  namespace fs = std::filesystem;
  for (const CgroupPath& cg : ParseMemoryCgroups(*cgroups)) {
    const std::vector<fs::path> roots = cg.v2 ? std::vector<fs::path>{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}
                                              : std::vector<fs::path>{"/sys/fs/cgroup/memory"};
    const char* limit_file = cg.v2 ? "memory.max" : "memory.limit_in_bytes";
    const char* usage_file = cg.v2 ? "memory.current" : "memory.usage_in_bytes";
    for (const fs::path& root : roots) {
      for (fs::path dir = root / fs::path(cg.path).relative_path();; dir = dir.parent_path()) {
        Result<std::string> limit = ReadFile((dir / limit_file).string());
        Result<std::string> usage = ReadFile((dir / usage_file).string());
        if (limit.ok() && usage.ok()) {
          if (std::optional<double> room = CgroupRoom(*limit, *usage); room && *room < best.bytes) {
            best = {*room, "cgroup " + dir.string() + " limit"};
          }
        }
        if (dir == root || dir.parent_path() == dir || dir.string().size() <= root.string().size()) break;
      }
    }
  }
  return best;
}

}  // namespace dslaunch::runtime
