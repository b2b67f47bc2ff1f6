// The sum of squares of an fp32 buffer in double: the square of the gradient norm the engine clips
// by and checks for overflow (runtime/engine/step_gradient.h is the CPU's).
#include "runtime/ops/cuda/cuda_status.h"
#include "runtime/ops/cuda/device_math.cuh"
#include "runtime/ops/cuda/ops.h"

namespace dslaunch::runtime::ops::cuda {
namespace {

// Blocks of the first pass: each sums a grid-strided share; the second pass sums their partials in
// block order. A fixed count makes the result the same bits for the same input on every call.
constexpr int kSumBlocks = 1024;
constexpr int kSumThreads = 256;

// The first pass's partials, one per block: device memory of this module, reused by every call
// (calls on one stream run one after another; SumOfSquares is for one stream at a time).
__device__ double sum_partials[kSumBlocks];

// Sums `value` over the block's threads in a fixed tree; thread 0 gets the result.
__device__ double BlockSum(double value) {
  __shared__ double shared[kSumThreads];
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int half = kSumThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  return shared[0];
}

// ------------------------------------------------------------------------------------------------
// Kernels

__global__ void PartialSquaresKernel(const float* x, long count) {
  double sum = 0.0;
  for (long i = blockIdx.x * static_cast<long>(kSumThreads) + threadIdx.x; i < count;
       i += static_cast<long>(kSumBlocks) * kSumThreads) {
    const double v = x[i];
    sum = __dadd_rn(sum, __dmul_rn(v, v));
  }
  const double block = BlockSum(sum);
  if (threadIdx.x == 0) sum_partials[blockIdx.x] = block;
}

__global__ void SumPartialsKernel(double* out) {
  double sum = 0.0;
  for (int i = threadIdx.x; i < kSumBlocks; i += kSumThreads) sum += sum_partials[i];
  const double total = BlockSum(sum);
  if (threadIdx.x == 0) *out = total;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Launchers

Status SumOfSquares(const float* x, long count, double* out, cudaStream_t stream) {
  if (count < 0) return InvalidArgumentError("SumOfSquares: negative count");
  if (out == nullptr || (count > 0 && x == nullptr)) return InvalidArgumentError("SumOfSquares: null pointer");
  PartialSquaresKernel<<<kSumBlocks, kSumThreads, 0, stream>>>(x, count);
  DSLAUNCH_RETURN_IF_ERROR(LaunchStatus("SumOfSquares"));
  SumPartialsKernel<<<1, kSumThreads, 0, stream>>>(out);
  return LaunchStatus("SumOfSquares");
}

}  // namespace dslaunch::runtime::ops::cuda
