// Test support for the gpu tier (docs/gpu.md, "Tests"): whether this machine has a CUDA device the
// runtime can open, and the skip rule of tests/support/skip.h for one that has not. A gpu test
// starts with DSLAUNCH_REQUIRE_GPU(); without a device it prints the skip line (CTest reports it as
// skipped, never as passed), or fails where DSLAUNCH_REQUIRE names `gpu` (scripts/gpu-check.sh).
#pragma once

#include <string>

#include "tests/support/skip.h"

namespace dslaunch::testing {

// "" when a CUDA device is usable; otherwise why not, in the CUDA runtime's words (e.g.
// "cudaGetDeviceCount: CUDA driver version is insufficient ..." on a machine without a driver).
// The answer is computed once per process.
std::string GpuUnavailableReason();

}  // namespace dslaunch::testing

#define DSLAUNCH_REQUIRE_GPU()                                                                   \
  do {                                                                                           \
    const std::string dslaunch_gpu_reason_ = ::dslaunch::testing::GpuUnavailableReason();        \
    DSLAUNCH_SKIP_UNLESS(dslaunch_gpu_reason_.empty(), "gpu", dslaunch_gpu_reason_);             \
  } while (false)
