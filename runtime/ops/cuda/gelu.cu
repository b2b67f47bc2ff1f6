// GELU, tanh approximation (GPT-2), and its backward (docs/model.md): elementwise, fp32 inside.
#include "runtime/ops/cuda/cuda_status.h"
#include "runtime/ops/cuda/device_math.cuh"
#include "runtime/ops/cuda/ops.h"

namespace dslaunch::runtime::ops::cuda {
namespace {

// sqrt(2/pi) and the cubic coefficient of GPT-2's tanh approximation (as runtime/ops/cpu/).
constexpr float kGeluScale = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

// ------------------------------------------------------------------------------------------------
// Kernels

template <typename T>
__global__ void GeluForwardKernel(T* out, const T* in, long count) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const float x = ToFloat(in[i]);
    out[i] = FromFloat<T>(0.5f * x * (1.0f + tanhf(kGeluScale * (x + kGeluCubic * x * x * x))));
  }
}

template <typename T>
__global__ void GeluBackwardKernel(T* din, const T* dout, const T* in, long count) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const float x = ToFloat(in[i]);
    const float th = tanhf(kGeluScale * (x + kGeluCubic * x * x * x));
    const float sech2 = 1.0f - th * th;
    const float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
    din[i] = FromFloat<T>(ToFloat(din[i]) + grad * ToFloat(dout[i]));
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Launchers

template <typename T>
Status GeluForward(T* out, const T* in, long count, cudaStream_t stream) {
  if (count < 0) return InvalidArgumentError("GeluForward: negative count");
  if (count == 0) return Status::Ok();
  if (out == nullptr || in == nullptr) return InvalidArgumentError("GeluForward: null pointer");
  GeluForwardKernel<T><<<GridFor(count, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(out, in, count);
  return LaunchStatus("GeluForward");
}

template <typename T>
Status GeluBackward(T* din, const T* dout, const T* in, long count, cudaStream_t stream) {
  if (count < 0) return InvalidArgumentError("GeluBackward: negative count");
  if (count == 0) return Status::Ok();
  if (din == nullptr || dout == nullptr || in == nullptr) return InvalidArgumentError("GeluBackward: null pointer");
  GeluBackwardKernel<T><<<GridFor(count, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(din, dout, in, count);
  return LaunchStatus("GeluBackward");
}

#define DSLAUNCH_INSTANTIATE_GELU(T)                                          \
  template Status GeluForward<T>(T*, const T*, long, cudaStream_t);          \
  template Status GeluBackward<T>(T*, const T*, const T*, long, cudaStream_t);
DSLAUNCH_INSTANTIATE_GELU(float)
DSLAUNCH_INSTANTIATE_GELU(__nv_bfloat16)
DSLAUNCH_INSTANTIATE_GELU(__half)
#undef DSLAUNCH_INSTANTIATE_GELU

}  // namespace dslaunch::runtime::ops::cuda
