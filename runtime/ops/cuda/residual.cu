// The residual adds of ops.h: grid-stride loops, fp32 inside, one rounding to T.
#include <string>

#include "runtime/ops/cuda/cuda_status.h"
#include "runtime/ops/cuda/device_math.cuh"
#include "runtime/ops/cuda/ops.h"

namespace dslaunch::runtime::ops::cuda {
namespace {

// ------------------------------------------------------------------------------------------------
// Kernels

// acc[i] += x[i], with X the type of x (T, or float for AddFloat).
template <typename T, typename X>
__global__ void AddKernel(T* acc, const X* x, long count) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    acc[i] = FromFloat<T>(ToFloat(acc[i]) + ToFloat(x[i]));
  }
}

template <typename T, typename X>
Status LaunchAdd(const char* op, T* acc, const X* x, long count, cudaStream_t stream) {
  if (count < 0) return InvalidArgumentError(std::string(op) + ": negative count");
  if (count == 0) return Status::Ok();
  if (acc == nullptr || x == nullptr) return InvalidArgumentError(std::string(op) + ": null pointer");
  AddKernel<T, X><<<GridFor(count, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(acc, x, count);
  return LaunchStatus(op);
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Launchers

template <typename T>
Status ResidualAdd(T* acc, const T* x, long count, cudaStream_t stream) {
  return LaunchAdd("ResidualAdd", acc, x, count, stream);
}

template <typename T>
Status AddFloat(T* acc, const float* x, long count, cudaStream_t stream) {
  return LaunchAdd("AddFloat", acc, x, count, stream);
}

#define DSLAUNCH_INSTANTIATE_RESIDUAL(T)                                  \
  template Status ResidualAdd<T>(T*, const T*, long, cudaStream_t);      \
  template Status AddFloat<T>(T*, const float*, long, cudaStream_t);
DSLAUNCH_INSTANTIATE_RESIDUAL(float)
DSLAUNCH_INSTANTIATE_RESIDUAL(__nv_bfloat16)
DSLAUNCH_INSTANTIATE_RESIDUAL(__half)
#undef DSLAUNCH_INSTANTIATE_RESIDUAL

}  // namespace dslaunch::runtime::ops::cuda
