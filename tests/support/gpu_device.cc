#include "tests/support/gpu_device.h"

#include <cuda_runtime_api.h>

namespace dslaunch::testing {

std::string GpuUnavailableReason() {
  static const std::string reason = [] {
    int count = 0;
    const cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(rc);
    if (count == 0) return std::string("cudaGetDeviceCount: no device");
    return std::string();
  }();
  return reason;
}

}  // namespace dslaunch::testing
