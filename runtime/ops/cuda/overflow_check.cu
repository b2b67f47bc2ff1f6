// The fp16 overflow check: is any element of a buffer +-inf or NaN (exponent bits all ones)?
#include <cstdint>

#include "runtime/ops/cuda/cuda_status.h"
#include "runtime/ops/cuda/device_math.cuh"
#include "runtime/ops/cuda/ops.h"

namespace dslaunch::runtime::ops::cuda {
namespace {

// Exponent masks: an element is inf or NaN exactly when all its exponent bits are set.
constexpr uint32_t kF32ExponentMask = 0x7F800000u;
constexpr uint16_t kF16ExponentMask = 0x7C00u;
constexpr uint16_t kBF16ExponentMask = 0x7F80u;

// ------------------------------------------------------------------------------------------------
// Kernels

// Reads the raw bits (so no compiler flag can turn the test into "never"). A thread that finds one
// stores 1; concurrent stores of the same value need no atomics.
template <typename Bits>
__global__ void InfOrNaNKernel(const Bits* data, long count, Bits mask, int* flag) {
  bool found = false;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    found |= (data[i] & mask) == mask;
  }
  if (found) *flag = 1;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Launchers

Status HasInfOrNaN(const void* data, long count, DType dtype, int* flag, cudaStream_t stream) {
  if (count < 0) return InvalidArgumentError("HasInfOrNaN: negative count");
  if (count == 0) return Status::Ok();
  if (data == nullptr || flag == nullptr) return InvalidArgumentError("HasInfOrNaN: null pointer");
  DSLAUNCH_RETURN_IF_ERROR(
      CheckDType("HasInfOrNaN: data type", dtype, {DType::kFloat32, DType::kFloat16, DType::kBFloat16}));
  const int grid = GridFor(count, kElementwiseThreads);
  switch (dtype) {
    case DType::kFloat32:
      InfOrNaNKernel<uint32_t>
          <<<grid, kElementwiseThreads, 0, stream>>>(static_cast<const uint32_t*>(data), count, kF32ExponentMask, flag);
      break;
    case DType::kFloat16:
      InfOrNaNKernel<uint16_t>
          <<<grid, kElementwiseThreads, 0, stream>>>(static_cast<const uint16_t*>(data), count, kF16ExponentMask, flag);
      break;
    case DType::kBFloat16:
      InfOrNaNKernel<uint16_t><<<grid, kElementwiseThreads, 0, stream>>>(static_cast<const uint16_t*>(data), count,
                                                                        kBF16ExponentMask, flag);
      break;
    case DType::kInt64:
    case DType::kUInt8:
      break;  // refused above
  }
  return LaunchStatus("HasInfOrNaN");
}

}  // namespace dslaunch::runtime::ops::cuda
