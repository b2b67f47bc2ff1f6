// Softmax cross-entropy per row and its backward (docs/model.md): one block per row for the
// softmax (V is large: 50257 for GPT-2), elementwise for the backward.
#include <cmath>

#include "runtime/ops/cuda/cuda_status.h"
#include "runtime/ops/cuda/device_math.cuh"
#include "runtime/ops/cuda/ops.h"

namespace dslaunch::runtime::ops::cuda {
namespace {

// Threads per row of the forward: a row of 50k logits is ~100 per thread.
constexpr int kSoftmaxThreads = 512;
// Floor for a probability before its log (as runtime/ops/cpu/): the loss stays finite when the
// target's probability underflows to 0.
constexpr float kMinProbability = 1e-30f;

// ------------------------------------------------------------------------------------------------
// Kernels

// Three passes over the row (max, sum of exponentials, normalized write), all reductions in fp32.
template <typename T>
__global__ void CrossEntropyForwardKernel(float* losses, T* probs, const T* logits, const int* targets, int v) {
  const long base = static_cast<long>(blockIdx.x) * v;
  const T* z = logits + base;
  T* p = probs + base;
  float mx = -INFINITY;
  for (int i = threadIdx.x; i < v; i += blockDim.x) mx = fmaxf(mx, ToFloat(z[i]));
  mx = BlockReduce<true>(mx);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < v; i += blockDim.x) sum += expf(ToFloat(z[i]) - mx);
  sum = BlockReduce<false>(sum);
  const float inv = 1.0f / sum;
  for (int i = threadIdx.x; i < v; i += blockDim.x) p[i] = FromFloat<T>(expf(ToFloat(z[i]) - mx) * inv);
  if (threadIdx.x == 0) {
    const int target = targets[blockIdx.x];
    if (target < 0 || target >= v) {
      losses[blockIdx.x] = NAN;
    } else {
      const float pt = expf(ToFloat(z[target]) - mx) * inv;
      losses[blockIdx.x] = -logf(fmaxf(pt, kMinProbability));
    }
  }
}

// dlogits[r][k] += (probs[r][k] - (k == target[r])) * dloss.
template <typename T>
__global__ void CrossEntropyBackwardKernel(T* dlogits, const T* probs, const int* targets, float dloss, int v,
                                           long total) {
  for (long idx = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long>(gridDim.x) * blockDim.x) {
    const int k = static_cast<int>(idx % v);
    const float onehot = targets[idx / v] == k ? 1.0f : 0.0f;
    dlogits[idx] = FromFloat<T>(ToFloat(dlogits[idx]) + (ToFloat(probs[idx]) - onehot) * dloss);
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Launchers

template <typename T>
Status CrossEntropyForward(float* losses, T* probs, const T* logits, const int* targets, int n, int v,
                           cudaStream_t stream) {
  if (n < 0 || v <= 0) return InvalidArgumentError("CrossEntropyForward: bad shape");
  if (n == 0) return Status::Ok();
  if (losses == nullptr || probs == nullptr || logits == nullptr || targets == nullptr) {
    return InvalidArgumentError("CrossEntropyForward: null pointer");
  }
  CrossEntropyForwardKernel<T><<<n, kSoftmaxThreads, 0, stream>>>(losses, probs, logits, targets, v);
  return LaunchStatus("CrossEntropyForward");
}

template <typename T>
Status CrossEntropyBackward(T* dlogits, const T* probs, const int* targets, float dloss, int n, int v,
                            cudaStream_t stream) {
  if (n < 0 || v <= 0) return InvalidArgumentError("CrossEntropyBackward: bad shape");
  const long total = static_cast<long>(n) * v;
  if (total == 0) return Status::Ok();
  if (dlogits == nullptr || probs == nullptr || targets == nullptr) {
    return InvalidArgumentError("CrossEntropyBackward: null pointer");
  }
  CrossEntropyBackwardKernel<T><<<GridFor(total, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
      dlogits, probs, targets, dloss, v, total);
  return LaunchStatus("CrossEntropyBackward");
}

#define DSLAUNCH_INSTANTIATE_CROSS_ENTROPY(T)                                                                \
  template Status CrossEntropyForward<T>(float*, T*, const T*, const int*, int, int, cudaStream_t);         \
  template Status CrossEntropyBackward<T>(T*, const T*, const int*, float, int, int, cudaStream_t);
DSLAUNCH_INSTANTIATE_CROSS_ENTROPY(float)
DSLAUNCH_INSTANTIATE_CROSS_ENTROPY(__nv_bfloat16)
DSLAUNCH_INSTANTIATE_CROSS_ENTROPY(__half)
#undef DSLAUNCH_INSTANTIATE_CROSS_ENTROPY

}  // namespace dslaunch::runtime::ops::cuda
