// The fused Adam / AdamW update on flat fp32 buffers (runtime/engine/optimizer.h's formulas), with
// the gradient scale folded in and an optional rounded copy of the new weights, in one pass.
#include <cmath>

#include "runtime/ops/cuda/cuda_status.h"
#include "runtime/ops/cuda/device_math.cuh"
#include "runtime/ops/cuda/ops.h"

namespace dslaunch::runtime::ops::cuda {
namespace {

// fp32 scalars of one update, converted on the host exactly as OptimizerUpdate converts them.
struct AdamScalars {
  float lr, beta1, beta2, eps, weight_decay, c1, c2, grad_scale;
  bool decoupled;
};

// ------------------------------------------------------------------------------------------------
// Kernels

// Each operation is an explicitly rounded intrinsic (__fmul_rn, ...): nvcc would otherwise fuse
// multiply-adds, which the CPU code (GCC, -ffp-contract=off under -std=c++20) does not, and the
// results would differ in the last bits. Written in the CPU code's order of evaluation.
template <typename CopyT>
__global__ void AdamKernel(float* params, const float* grads, float* m, float* v, long n, AdamScalars s,
                           CopyT* copy) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    float g = __fmul_rn(grads[i], s.grad_scale);
    float p = params[i];
    if (s.decoupled) {
      p = __fsub_rn(p, __fmul_rn(__fmul_rn(s.lr, s.weight_decay), p));  // p -= lr * wd * p
    } else {
      g = __fadd_rn(g, __fmul_rn(s.weight_decay, p));  // g += wd * p
    }
    const float mi = __fadd_rn(__fmul_rn(s.beta1, m[i]), __fmul_rn(__fsub_rn(1.0f, s.beta1), g));
    const float vi = __fadd_rn(__fmul_rn(s.beta2, v[i]), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, s.beta2), g), g));
    // p -= lr * (m * c1) / (sqrt(v * c2) + eps)
    const float step =
        __fdiv_rn(__fmul_rn(s.lr, __fmul_rn(mi, s.c1)), __fadd_rn(__fsqrt_rn(__fmul_rn(vi, s.c2)), s.eps));
    p = __fsub_rn(p, step);
    m[i] = mi;
    v[i] = vi;
    params[i] = p;
    if (copy != nullptr) copy[i] = FromFloat<CopyT>(p);
  }
}

template <typename CopyT>
Status LaunchAdam(float* params, const float* grads, float* m, float* v, long n, const AdamScalars& s, void* copy,
                  cudaStream_t stream) {
  AdamKernel<CopyT><<<GridFor(n, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
      params, grads, m, v, n, s, static_cast<CopyT*>(copy));
  return LaunchStatus("AdamUpdate");
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Launchers

Status AdamUpdate(const AdamParams& hyper, float* params, const float* grads, float* m, float* v, long n, bool decay,
                  void* param_copy, DType copy_dtype, cudaStream_t stream) {
  if (n < 0) return InvalidArgumentError("AdamUpdate: negative size");
  if (hyper.step < 1) return InvalidArgumentError("AdamUpdate: step must be >= 1 (1-based update number)");
  if (n == 0) return Status::Ok();
  if (params == nullptr || grads == nullptr || m == nullptr || v == nullptr) {
    return InvalidArgumentError("AdamUpdate: null pointer");
  }
  AdamScalars s{};
  s.lr = static_cast<float>(hyper.lr);
  s.beta1 = static_cast<float>(hyper.beta1);
  s.beta2 = static_cast<float>(hyper.beta2);
  s.eps = static_cast<float>(hyper.eps);
  s.weight_decay = decay ? static_cast<float>(hyper.weight_decay) : 0.0f;
  // As OptimizerUpdate: the bias corrections in double, then one rounding to float.
  const double t = static_cast<double>(hyper.step);
  s.c1 = hyper.bias_correction ? 1.0f / static_cast<float>(1.0 - std::pow(hyper.beta1, t)) : 1.0f;
  s.c2 = hyper.bias_correction ? 1.0f / static_cast<float>(1.0 - std::pow(hyper.beta2, t)) : 1.0f;
  s.grad_scale = hyper.grad_scale;
  s.decoupled = hyper.decoupled;
  if (param_copy == nullptr) return LaunchAdam<float>(params, grads, m, v, n, s, nullptr, stream);
  switch (copy_dtype) {
    case DType::kFloat32:
      return LaunchAdam<float>(params, grads, m, v, n, s, param_copy, stream);
    case DType::kBFloat16:
      return LaunchAdam<__nv_bfloat16>(params, grads, m, v, n, s, param_copy, stream);
    case DType::kFloat16:
      return LaunchAdam<__half>(params, grads, m, v, n, s, param_copy, stream);
    case DType::kInt64:
    case DType::kUInt8:
      break;
  }
  return CheckDType("AdamUpdate: copy type", copy_dtype, {DType::kFloat32, DType::kBFloat16, DType::kFloat16});
}

}  // namespace dslaunch::runtime::ops::cuda
