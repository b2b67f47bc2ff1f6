// fp32 <-> 16-bit conversions on the device, rounding as runtime/core/sixteen_bit_float.h does
// (to nearest even; the hardware's cvt.rn instructions through cuda_bf16.h / cuda_fp16.h).
#include "runtime/ops/cuda/cuda_status.h"
#include "runtime/ops/cuda/device_math.cuh"
#include "runtime/ops/cuda/ops.h"

namespace dslaunch::runtime::ops::cuda {
namespace {

// ------------------------------------------------------------------------------------------------
// Kernels

template <typename To, typename From>
__global__ void ConvertKernel(To* out, const From* in, long count) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    out[i] = FromFloat<To>(ToFloat(in[i]));
  }
}

template <typename To, typename From>
Status LaunchConvert(void* out, const void* in, long count, cudaStream_t stream, const char* op) {
  ConvertKernel<To, From><<<GridFor(count, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
      static_cast<To*>(out), static_cast<const From*>(in), count);
  return LaunchStatus(op);
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Launchers

Status FloatTo16(void* out, DType out_dtype, const float* in, long count, cudaStream_t stream) {
  if (count < 0) return InvalidArgumentError("FloatTo16: negative count");
  if (count == 0) return Status::Ok();
  if (out == nullptr || in == nullptr) return InvalidArgumentError("FloatTo16: null pointer");
  switch (out_dtype) {
    case DType::kBFloat16:
      return LaunchConvert<__nv_bfloat16, float>(out, in, count, stream, "FloatTo16");
    case DType::kFloat16:
      return LaunchConvert<__half, float>(out, in, count, stream, "FloatTo16");
    case DType::kFloat32:
    case DType::kInt64:
    case DType::kUInt8:
      break;
  }
  return CheckDType("FloatTo16: output type", out_dtype, {DType::kBFloat16, DType::kFloat16});
}

Status Float16To32(float* out, const void* in, DType in_dtype, long count, cudaStream_t stream) {
  if (count < 0) return InvalidArgumentError("Float16To32: negative count");
  if (count == 0) return Status::Ok();
  if (out == nullptr || in == nullptr) return InvalidArgumentError("Float16To32: null pointer");
  switch (in_dtype) {
    case DType::kBFloat16:
      return LaunchConvert<float, __nv_bfloat16>(out, in, count, stream, "Float16To32");
    case DType::kFloat16:
      return LaunchConvert<float, __half>(out, in, count, stream, "Float16To32");
    case DType::kFloat32:
    case DType::kInt64:
    case DType::kUInt8:
      break;
  }
  return CheckDType("Float16To32: input type", in_dtype, {DType::kBFloat16, DType::kFloat16});
}

}  // namespace dslaunch::runtime::ops::cuda
