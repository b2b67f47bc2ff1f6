#include "launcher/machine/gpu_discovery.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>

#include "common/exit_status.h"
#include "common/spawn.h"
#include "launcher/machine/nvidia_smi.h"

namespace dslaunch::launcher {
namespace {

// NVML's entry points, as nvml.h declares them (the header is not needed: three functions).
using NvmlReturn = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
constexpr NvmlReturn kNvmlSuccess = 0;
using NvmlInit = NvmlReturn (*)();
using NvmlGetCount = NvmlReturn (*)(unsigned int*);
using NvmlShutdown = NvmlReturn (*)();
using NvmlErrorString = const char* (*)(NvmlReturn);
// The most output read from nvidia-smi -L: 64 KiB is a few hundred GPUs and MIG devices.
constexpr size_t kMaxOutputBytes = 64 << 10;

std::string NvmlError(void* lib, const std::string& call, NvmlReturn code) {
  auto error_string = reinterpret_cast<NvmlErrorString>(::dlsym(lib, "nvmlErrorString"));
  std::string text = error_string != nullptr ? error_string(code) : "";
  return call + " failed with code " + std::to_string(code) + (text.empty() ? "" : " (" + text + ")");
}

// Counts through NVML; nullopt when the library does not load.
std::optional<Result<int>> CountWithNvml(const std::string& library) {
  void* lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return std::nullopt;
  const std::string where = "NVML (" + library + "): ";
  auto init = reinterpret_cast<NvmlInit>(::dlsym(lib, "nvmlInit_v2"));
  auto get_count = reinterpret_cast<NvmlGetCount>(::dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto shutdown = reinterpret_cast<NvmlShutdown>(::dlsym(lib, "nvmlShutdown"));
  Result<int> result = 0;
  if (init == nullptr || get_count == nullptr || shutdown == nullptr) {
    result = UnavailableError(where + "missing nvmlInit_v2, nvmlDeviceGetCount_v2 or nvmlShutdown");
  } else if (NvmlReturn rc = init(); rc != kNvmlSuccess) {
    result = UnavailableError(where + NvmlError(lib, "nvmlInit_v2", rc));
  } else {
    unsigned int count = 0;
    if (NvmlReturn got = get_count(&count); got != kNvmlSuccess) {
      result = UnavailableError(where + NvmlError(lib, "nvmlDeviceGetCount_v2", got));
    } else {
      result = static_cast<int>(count);
    }
    shutdown();
  }
  ::dlclose(lib);
  return result;
}

// The first executable regular file named nvidia-smi in `path`'s directories; "" if none.
std::string FindNvidiaSmi(const std::string& path) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t colon = path.find(':', start);
    if (colon == std::string::npos) colon = path.size();
    std::string dir = path.substr(start, colon - start);
    if (dir.empty()) dir = ".";  // an empty PATH entry is the working directory
    const std::string candidate = dir + "/nvidia-smi";
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = colon + 1;
  }
  return "";
}

// Runs `program -L`, stdout and stderr together, within `timeout`.
Result<int> CountWithNvidiaSmi(const std::string& program, std::chrono::milliseconds timeout) {
  SpawnOptions so;
  so.argv = {program, "-L"};
  so.exec_error_prefix = "dslaunch: ";
  DSLAUNCH_ASSIGN_OR_RETURN(ProgramOutput run, RunAndReadOutput(so, timeout, kMaxOutputBytes, /*with_stderr=*/true));
  if (run.timed_out) {
    return UnavailableError(program + " -L did not answer within " +
                            std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) +
                            " s (a hung driver?)");
  }
  const int code = run.signal == 0 ? run.exit_code : 128 + run.signal;
  auto count = CountNvidiaSmiGpus(code, run.output);
  if (!count.ok()) return UnavailableError(program + ": " + count.status().message());
  return count;
}

}  // namespace

Result<GpuCount> CountLocalGpus(const GpuDiscoveryOptions& options) {
  if (!options.nvml_library.empty()) {
    if (auto nvml = CountWithNvml(options.nvml_library)) {
      if (!nvml->ok()) return nvml->status();
      return GpuCount{**nvml, "NVML"};
    }
  }
  const std::string smi = FindNvidiaSmi(options.path);
  if (smi.empty()) return GpuCount{0, ""};
  DSLAUNCH_ASSIGN_OR_RETURN(int count, CountWithNvidiaSmi(smi, options.timeout));
  return GpuCount{count, smi};
}

}  // namespace dslaunch::launcher
