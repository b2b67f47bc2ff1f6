// Token and position embeddings and their backward (docs/model.md): elementwise over the output,
// fp32 atomics for the token-embedding gradient (tokens repeat), a plain sum over the batch for the
// position-embedding gradient.
#include <cmath>

#include "runtime/ops/cuda/cuda_status.h"
#include "runtime/ops/cuda/device_math.cuh"
#include "runtime/ops/cuda/ops.h"

namespace dslaunch::runtime::ops::cuda {
namespace {

// ------------------------------------------------------------------------------------------------
// Kernels

// out[i][k] = wte[tokens[i]][k] + wpe[i % t][k]; NaN for a token outside [0, v).
template <typename T>
__global__ void EmbeddingForwardKernel(T* out, const int* tokens, const T* wte, const T* wpe, int t, int c, int v,
                                       long total) {
  for (long idx = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long>(gridDim.x) * blockDim.x) {
    const long row = idx / c;
    const int k = static_cast<int>(idx % c);
    const int token = tokens[row];
    float value = NAN;
    if (token >= 0 && token < v) {
      value = ToFloat(wte[static_cast<long>(token) * c + k]);
      if (wpe != nullptr) value += ToFloat(wpe[(row % t) * c + k]);
    }
    out[idx] = FromFloat<T>(value);
  }
}

// dwte[tokens[i]][k] += dout[i][k].
template <typename T>
__global__ void TokenEmbeddingGradKernel(float* dwte, const T* dout, const int* tokens, int c, int v, long total) {
  for (long idx = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long>(gridDim.x) * blockDim.x) {
    const int token = tokens[idx / c];
    if (token >= 0 && token < v) atomicAdd(dwte + static_cast<long>(token) * c + idx % c, ToFloat(dout[idx]));
  }
}

// dwpe[p][k] += sum_b dout[b][p][k], in batch order (deterministic).
template <typename T>
__global__ void PositionEmbeddingGradKernel(float* dwpe, const T* dout, int b, int t, int c) {
  const long per_sequence = static_cast<long>(t) * c;
  for (long idx = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; idx < per_sequence;
       idx += static_cast<long>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int bi = 0; bi < b; ++bi) sum += ToFloat(dout[bi * per_sequence + idx]);
    dwpe[idx] += sum;
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Launchers

template <typename T>
Status EmbeddingForward(T* out, const int* tokens, const T* wte, const T* wpe, int b, int t, int c, int v,
                        cudaStream_t stream) {
  if (b < 0 || t < 0 || c <= 0 || v <= 0) return InvalidArgumentError("EmbeddingForward: bad shape");
  const long total = static_cast<long>(b) * t * c;
  if (total == 0) return Status::Ok();
  if (out == nullptr || tokens == nullptr || wte == nullptr) {
    return InvalidArgumentError("EmbeddingForward: null pointer");
  }
  EmbeddingForwardKernel<T>
      <<<GridFor(total, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(out, tokens, wte, wpe, t, c, v, total);
  return LaunchStatus("EmbeddingForward");
}

template <typename T>
Status EmbeddingBackward(float* dwte, float* dwpe, const T* dout, const int* tokens, int b, int t, int c, int v,
                         cudaStream_t stream) {
  if (b < 0 || t < 0 || c <= 0 || v <= 0) return InvalidArgumentError("EmbeddingBackward: bad shape");
  const long total = static_cast<long>(b) * t * c;
  if (total == 0) return Status::Ok();
  if (dwte == nullptr || dout == nullptr || tokens == nullptr) {
    return InvalidArgumentError("EmbeddingBackward: null pointer");
  }
  TokenEmbeddingGradKernel<T>
      <<<GridFor(total, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(dwte, dout, tokens, c, v, total);
  DSLAUNCH_RETURN_IF_ERROR(LaunchStatus("EmbeddingBackward(dwte)"));
  if (dwpe == nullptr) return Status::Ok();
  const long per_sequence = static_cast<long>(t) * c;
  PositionEmbeddingGradKernel<T>
      <<<GridFor(per_sequence, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(dwpe, dout, b, t, c);
  return LaunchStatus("EmbeddingBackward(dwpe)");
}

#define DSLAUNCH_INSTANTIATE_EMBEDDING(T)                                                                 \
  template Status EmbeddingForward<T>(T*, const int*, const T*, const T*, int, int, int, int, cudaStream_t); \
  template Status EmbeddingBackward<T>(float*, float*, const T*, const int*, int, int, int, int, cudaStream_t);
DSLAUNCH_INSTANTIATE_EMBEDDING(float)
DSLAUNCH_INSTANTIATE_EMBEDDING(__nv_bfloat16)
DSLAUNCH_INSTANTIATE_EMBEDDING(__half)
#undef DSLAUNCH_INSTANTIATE_EMBEDDING

}  // namespace dslaunch::runtime::ops::cuda
