// Reading `nvidia-smi -L`, the fallback of the launcher's GPU discovery (launcher/machine/gpu_discovery.h).
// Pure: the command's exit code and output are inputs.
//
//   GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5d0c...)
//     MIG 3g.40gb     Device  0: (UUID: MIG-0b2f...)
//   GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-9a41...)
#pragma once

#include <optional>
#include <string_view>

#include "common/status.h"

namespace dslaunch::launcher {

// What nvidia-smi prints, and exits non-zero with, on a machine whose driver sees no GPU.
inline constexpr std::string_view kNvidiaSmiNoDevices = "No devices were found";

// The number of GPUs in the output of `nvidia-smi -L` that exited with `exit_code`: its lines
// "GPU <index>: ..." (MIG devices, indented under their GPU, are part of it and not counted;
// other lines, such as warnings, are ignored). kNvidiaSmiNoDevices anywhere in the output gives 0
// whatever the exit code. Otherwise kUnavailable, quoting the first line of the output, for a
// non-zero exit code ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA
// driver ...") or for an output without any GPU line; and for GPU indices that are not 0, 1, ...
// in order (the output of something else).
Result<int> CountNvidiaSmiGpus(int exit_code, std::string_view output);

}  // namespace dslaunch::launcher
