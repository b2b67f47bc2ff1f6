// What the kernels of runtime/ops/cuda/ share (nvcc only, internal): fp32 from and to the element
// types, warp and block reductions, and the grid sizes of the launchers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "runtime/ops/cuda/ops.h"

namespace dslaunch::runtime::ops::cuda {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullWarpMask = 0xffffffffu;
// Threads per block of the elementwise kernels: a common choice that keeps every SM busy.
inline constexpr int kElementwiseThreads = 256;
// Grid-stride loops cover any size with at most this many blocks (2^31 - 1 is CUDA's limit on x);
// 2^16 blocks of 256 threads are far more than enough to fill a GPU.
inline constexpr long kMaxGridBlocks = 1L << 16;

// Blocks for `count` items at `per_block` items per block, at least 1, capped for grid-stride loops.
inline int GridFor(long count, long per_block) {
  return static_cast<int>(std::clamp((count + per_block - 1) / per_block, 1L, kMaxGridBlocks));
}

// The DType tag of an element type (for the matmuls' cuBLAS types).
template <typename T>
inline constexpr DType kDTypeOf = DType::kFloat32;
template <>
inline constexpr DType kDTypeOf<__nv_bfloat16> = DType::kBFloat16;
template <>
inline constexpr DType kDTypeOf<__half> = DType::kFloat16;

// Loads and stores: storage in T, arithmetic in fp32, stores rounded to nearest even.
__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ float FromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float x) {
  return __float2half_rn(x);
}

__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullWarpMask, v, offset);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(kFullWarpMask, v, offset));
  return v;
}

// Sum (or max) of `v` over the whole block, returned to every thread. blockDim.x must be a multiple
// of 32 (at most 1024); every thread of the block must call it (it synchronizes twice).
template <bool kMax>
__device__ float BlockReduce(float v) {
  __shared__ float partial[kWarpSize];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  v = kMax ? WarpMax(v) : WarpSum(v);
  __syncthreads();  // `partial` may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float r = lane < warps ? partial[lane] : (kMax ? -INFINITY : 0.0f);
  return kMax ? WarpMax(r) : WarpSum(r);
}

}  // namespace dslaunch::runtime::ops::cuda
