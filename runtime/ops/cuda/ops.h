// CUDA forward and backward kernels of the bundled models' layers: the GPU twins of
// runtime/ops/cpu/ops.h, with the same semantics and layouts (formulas: docs/model.md), tested
// against them in tests/runtime/ops/cuda/. A plain C++ header: g++-compiled code calls these.
//
// Conventions, the same for every op:
//  - All pointers are device pointers unless a parameter says otherwise; shapes are element counts
//    (B batch, T sequence, C channels, NH heads, V vocabulary, N = B*T rows), arrays row-major.
//  - Forward writes its outputs (and any cache the backward needs); it never accumulates.
//  - Backward ACCUMULATES (+=) into every gradient it produces, as on the CPU; callers zero
//    gradients at the start of a step. A null gradient pointer (where documented) skips that one.
//  - Weights follow nn.Linear: weight[out][in].
//  - Element type T is float, __nv_bfloat16 or __half for every templated op (explicitly
//    instantiated in the .cu files; another T is a link error). The ops that take the type at run
//    time take a DType of runtime/core/dtype.h and accept the floating-point subset each names
//    (kFloat32, kBFloat16, kFloat16; the integer types never): another type is kInvalidArgument
//    naming the op and the type ("FloatTo16: output type int64 is not supported (supported: bf16,
//    fp16)"). Storage only: all arithmetic,
//    reductions and matmul accumulation are fp32; results are rounded to T once, to nearest even.
//    Side arrays keep their own types whatever T is: LayerNorm's mean/rstd, losses and the
//    embedding gradients are float, tokens and targets int.
//  - Every launcher enqueues on `stream` (0 = the legacy default stream) and returns without
//    synchronizing. The returned Status covers argument checks (kInvalidArgument: negative sizes,
//    null required pointers, a head count that does not divide C) and launch errors (kInternal,
//    naming the op and the CUDA or cuBLAS error); errors of the kernel's execution surface at the
//    caller's next synchronization, as CUDA's do. Empty shapes are OK and launch nothing.
//  - Thread-safety: the launchers keep no state; calls on one stream run in stream order. A
//    CublasLtContext (the matmul ops) is for one host thread and one stream at a time.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "runtime/core/dtype.h"
#include "runtime/ops/cuda/cublaslt_context.h"

namespace dslaunch::runtime::ops::cuda {

// ---------------------------------------------------------------------------------------------
// Linear (linear.cu), on cuBLASLt with fp32 accumulation (CUBLAS_COMPUTE_32F: no TF32 for fp32
// inputs, so fp32 results are comparable with the CPU's sgemm).

// out[N][out_dim] = in[N][in_dim] * weight[out_dim][in_dim]^T + bias[out_dim] (bias may be null).
// The bias is added in the matmul's fp32 accumulator (it is broadcast into `out`, then the product
// is added with beta = 1), so `out` is rounded to T once. `out` must not overlap the inputs.
template <typename T>
Status LinearForward(const CublasLtContext& ctx, T* out, const T* in, const T* weight, const T* bias, int n,
                     int in_dim, int out_dim, cudaStream_t stream);

// din[N][in_dim] += dout * weight; dweight[out_dim][in_dim] += dout^T * in; dbias[out_dim] += column
// sums of dout. Each of din, dweight, dbias may be null. Deterministic (no atomics).
template <typename T>
Status LinearBackward(const CublasLtContext& ctx, T* din, T* dweight, T* dbias, const T* dout, const T* in,
                      const T* weight, int n, int in_dim, int out_dim, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------
// Layer norm (layer_norm.cu) over the last dimension C: out = (x - mean) * rstd * weight + bias,
// rstd = 1/sqrt(biased var + kLayerNormEps). mean[N] and rstd[N] (float) are saved for the backward.
inline constexpr float kLayerNormEps = 1e-5f;  // = runtime/ops/cpu/ops.h's; GPT-2's epsilon
template <typename T>
Status LayerNormForward(T* out, float* mean, float* rstd, const T* in, const T* weight, const T* bias, int n, int c,
                        cudaStream_t stream);
// din += ..., dweight += sum_rows dout * xhat, dbias += sum_rows dout (docs/model.md). All three
// required. Deterministic: the parameter gradients are column sums, no atomics.
template <typename T>
Status LayerNormBackward(T* din, T* dweight, T* dbias, const T* dout, const T* in, const T* weight,
                         const float* mean, const float* rstd, int n, int c, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------
// GELU (gelu.cu), tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// `out` may equal `in`.
template <typename T>
Status GeluForward(T* out, const T* in, long count, cudaStream_t stream);
template <typename T>
Status GeluBackward(T* din, const T* dout, const T* in, long count, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------
// Embedding (embedding.cu): out[b][t][:] = wte[tokens[b][t]][:] + wpe[t][:] (wpe may be null).
// tokens[N] int (device). Unlike the CPU op this one knows the vocabulary size `v`: a token
// outside [0, v) is not read from, its output row is NaN (so that it shows in the loss instead of
// reading out of bounds).
template <typename T>
Status EmbeddingForward(T* out, const int* tokens, const T* wte, const T* wpe, int b, int t, int c, int v,
                        cudaStream_t stream);
// dwte[V][C] += dout rows at their tokens (fp32 atomics: the sum's order, so its last bits, vary
// between runs); dwpe[T][C] += sum over the batch (deterministic; dwpe may be null). The gradients
// are float whatever T is (16-bit atomics would round every addition). Tokens outside [0, v) add
// nothing.
template <typename T>
Status EmbeddingBackward(float* dwte, float* dwpe, const T* dout, const int* tokens, int b, int t, int c, int v,
                         cudaStream_t stream);

// ---------------------------------------------------------------------------------------------
// Causal multi-head self-attention (attention.cu). qkv[N][3C] holds q, k, v (C each, NH heads of
// hs = C/NH); out[N][C]; att[B][NH][T][T] receives the softmax probabilities (0 above the
// diagonal), kept for the backward. The products are cuBLASLt batched over the heads of one
// sequence (B calls each); the scores S = q k^T / sqrt(hs) are computed into `att` (so rounded to T
// before the fp32 softmax, as llm.c does) and the whole T x T square is multiplied (the masked half
// too: the softmax then writes its zeros).
template <typename T>
Status AttentionForward(const CublasLtContext& ctx, T* out, T* att, const T* qkv, int b, int t, int c, int nh,
                        cudaStream_t stream);
// Elements of T the backward's `scratch` must hold: NH*T*T (dP then dS of one sequence; the B
// sequences reuse it one after another in stream order).
long AttentionBackwardScratchElements(int t, int nh);
// dqkv[N][3C] += the gradients of q, k and v. `scratch` is device memory of
// AttentionBackwardScratchElements(t, nh) elements of T, not read before written; it must stay
// untouched until the stream has run this op.
template <typename T>
Status AttentionBackward(const CublasLtContext& ctx, T* dqkv, T* scratch, const T* dout, const T* qkv, const T* att,
                         int b, int t, int c, int nh, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------
// Softmax cross-entropy per row (cross_entropy.cu): probs[N][V] = softmax(logits) (in T),
// losses[N] (float) = -log max(p[target], 1e-30), from the fp32 probability before it is rounded
// to T. targets[N] int (device); a target outside [0, v) gives a NaN loss and no read.
template <typename T>
Status CrossEntropyForward(float* losses, T* probs, const T* logits, const int* targets, int n, int v,
                           cudaStream_t stream);
// dlogits += (probs - onehot(target)) * dloss (dloss per row, e.g. 1/N for a mean loss; a host
// value). A row whose target is outside [0, v) gets no one-hot term.
template <typename T>
Status CrossEntropyBackward(T* dlogits, const T* probs, const int* targets, float dloss, int n, int v,
                            cudaStream_t stream);

// ---------------------------------------------------------------------------------------------
// Residual adds (residual.cu): the elementwise sums the device models need between the layers.
// acc[i] = acc[i] + x[i] for i < count: the residual stream of a pre-norm block (the CPU model's
// `out[i] += x[i]`). `acc` and `x` may not overlap unless they are equal.
template <typename T>
Status ResidualAdd(T* acc, const T* x, long count, cudaStream_t stream);
// acc[i] = acc[i] + x[i] with x in fp32: float gradients (EmbeddingBackward's) added into
// gradients stored in T.
template <typename T>
Status AddFloat(T* acc, const float* x, long count, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------
// Fused Adam / AdamW update (adamw.cu) on flat fp32 buffers: the formulas of
// runtime/engine/optimizer.h (OptimizerUpdate, kinds kAdam and kAdamW), element for element in the
// same fp32 operations, so the results match the CPU's bit for bit (apart from what grad_scale
// changes, see below). The engine maps its OptimizerParams onto this struct (ops may not include
// runtime/engine/: docs/source-layout.md).
struct AdamParams {
  bool decoupled = true;  // true: AdamW (p -= lr wd p first); false: Adam with L2 (g += wd p)
  double lr = 1e-3;       // this step's rate (the schedule's), converted to float as on the CPU
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // applied only when the call's `decay` is true
  bool bias_correction = true;
  int64_t step = 1;          // t, the 1-based update number (bias correction 1/(1-b^t), in double)
  float grad_scale = 1.0f;   // g = grads * grad_scale first: 1/loss_scale times the clip coefficient
};
// One update of params[n], m[n], v[n] from grads[n] (all float). `decay` is the weight-decay flag of
// the whole call: a caller with DecaySegments calls once per segment (pointers offset by
// segment.begin). With grad_scale != 1 the CPU reference is OptimizerUpdate on grads * grad_scale
// (one fp32 multiply). `param_copy` (may be null) receives the updated params rounded to
// `copy_dtype` (kBFloat16 or kFloat16; kFloat32 copies exactly; read only with a copy) in the same
// pass: the 16-bit working weights.
Status AdamUpdate(const AdamParams& hyper, float* params, const float* grads, float* m, float* v, long n,
                  bool decay, void* param_copy, DType copy_dtype, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------
// fp16 overflow check (overflow_check.cu): sets *flag (a device int) to 1 when any of the `count`
// elements of `data` (of `dtype`: kFloat32, kFloat16 or kBFloat16) is +-inf or NaN; never clears
// it, so one flag collects several buffers. The engine zeroes the flag (cudaMemsetAsync), checks
// every gradient buffer into it, then copies it to the host and agrees across ranks
// (runtime/engine/loss_scaler.h). Bit tests on the exponent, unaffected by fast-math.
Status HasInfOrNaN(const void* data, long count, DType dtype, int* flag, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------
// Sum of squares (norm.cu): *out (one device double) = the sum of x[i]^2 over `count` floats, in
// double: the square of the gradient norm. Deterministic (a fixed split into blocks, summed in a
// fixed order), but not the CPU's element-order sum, so its last bits differ from
// StepGradient::SumOfSquares. Count 0 writes 0. Uses one device scratch of the module: one stream
// at a time.
Status SumOfSquares(const float* x, long count, double* out, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------
// 16-bit conversions (convert.cu), rounding as runtime/core/sixteen_bit_float.h: fp32 -> 16 bit to
// nearest even (subnormals, overflow to infinity, signs kept); 16 bit -> fp32 exact. NaN stays NaN
// but its payload is the hardware's (canonical) one, not the CPU's. The 16-bit side is kBFloat16 or
// kFloat16.
Status FloatTo16(void* out, DType out_dtype, const float* in, long count, cudaStream_t stream);
Status Float16To32(float* out, const void* in, DType in_dtype, long count, cudaStream_t stream);

}  // namespace dslaunch::runtime::ops::cuda
