// How many GPUs this machine has, for a local job's default slots (docs/cli.md, "Default slots
// from the machine's GPUs"). NVML first, loaded at run time (dlopen), so that the binaries need
// no driver to run; `nvidia-smi -L` when the library is missing; no GPU when both are. An error
// of a library or command that is present is an error, never a silent "no GPU".
//
// The seam for tests: the library's name (`nvml_library`, empty to skip NVML) and the PATH
// searched for nvidia-smi, so that a test can put a fake nvidia-smi script first on PATH.
#pragma once

#include <chrono>
#include <string>

#include "common/status.h"

namespace dslaunch::launcher {

// The NVML library of the NVIDIA driver (the soname, as the driver installs it).
inline constexpr char kNvmlLibrary[] = "libnvidia-ml.so.1";
// The launcher's variable that names another NVML library; set and empty: skip NVML.
inline constexpr char kNvmlLibraryVariable[] = "DSLAUNCH_NVML_LIBRARY";
// How long `nvidia-smi -L` may take: it answers in well under a second, but hangs for minutes on a
// wedged driver, and a launcher that waits silently is worse than one that says so.
inline constexpr std::chrono::seconds kNvidiaSmiTimeout{30};

struct GpuDiscoveryOptions {
  std::string nvml_library = kNvmlLibrary;  // dlopen name; empty: do not use NVML
  std::string path;                         // the PATH searched for nvidia-smi
  std::chrono::milliseconds timeout = kNvidiaSmiTimeout;
};

struct GpuCount {
  int count = 0;
  std::string source;  // "NVML", the nvidia-smi path, or "" when neither is present
};

// Counts the GPUs: NVML (nvmlInit_v2, nvmlDeviceGetCount_v2, nvmlShutdown) when the library
// loads; else nvidia-smi -L (CountNvidiaSmiGpus, launcher/machine/nvidia_smi.h) when PATH holds an
// executable nvidia-smi; else 0. Errors are kUnavailable and name the source and what it said
// (an NVML error code and string, nvidia-smi's exit code and first line, a timeout).
Result<GpuCount> CountLocalGpus(const GpuDiscoveryOptions& options);

}  // namespace dslaunch::launcher
