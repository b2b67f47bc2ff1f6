// Causal multi-head self-attention and its backward (docs/model.md, "Causal attention"): the
// products on cuBLASLt, batched over the NH heads of one sequence (strided views into qkv, no
// copies), and a fused causal softmax (forward) and softmax backward, a warp per row.
#include <cmath>
#include <string>

#include "runtime/ops/cuda/cuda_status.h"
#include "runtime/ops/cuda/device_math.cuh"
#include "runtime/ops/cuda/matmul.h"
#include "runtime/ops/cuda/ops.h"

namespace dslaunch::runtime::ops::cuda {
namespace {

// Rows per block of the softmax kernels (a warp each): 256 threads.
constexpr int kRowsPerBlock = 8;

// ------------------------------------------------------------------------------------------------
// Kernels

// In place on rows of T scores (B*NH*T rows; row r is query position r % T): p[j] = softmax over
// keys j <= query, 0 above. The scores hold scale * q.k already.
template <typename T>
__global__ void CausalSoftmaxKernel(T* att, long rows, int t) {
  const int lane = threadIdx.x % kWarpSize;
  const long row = blockIdx.x * static_cast<long>(kRowsPerBlock) + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // whole warps leave together
  T* a = att + row * t;
  const int len = static_cast<int>(row % t) + 1;
  float mx = -INFINITY;
  for (int j = lane; j < len; j += kWarpSize) mx = fmaxf(mx, ToFloat(a[j]));
  mx = WarpMax(mx);
  float sum = 0.0f;
  for (int j = lane; j < len; j += kWarpSize) sum += expf(ToFloat(a[j]) - mx);
  const float inv = 1.0f / WarpSum(sum);
  for (int j = lane; j < t; j += kWarpSize) a[j] = FromFloat<T>(j < len ? expf(ToFloat(a[j]) - mx) * inv : 0.0f);
}

// In place on rows of dP (NH*T rows of one sequence): dS[j] = P[j] (dP[j] - sum_k P[k] dP[k]) for
// keys j <= query, 0 above (masked entries carry no gradient, whatever the product left there).
template <typename T>
__global__ void CausalSoftmaxBackwardKernel(T* grad, const T* att, long rows, int t) {
  const int lane = threadIdx.x % kWarpSize;
  const long row = blockIdx.x * static_cast<long>(kRowsPerBlock) + threadIdx.x / kWarpSize;
  if (row >= rows) return;
  T* d = grad + row * t;
  const T* p = att + row * t;
  const int len = static_cast<int>(row % t) + 1;
  float dot = 0.0f;
  for (int j = lane; j < len; j += kWarpSize) dot += ToFloat(d[j]) * ToFloat(p[j]);
  dot = WarpSum(dot);
  for (int j = lane; j < t; j += kWarpSize) {
    d[j] = FromFloat<T>(j < len ? ToFloat(p[j]) * (ToFloat(d[j]) - dot) : 0.0f);
  }
}

Status CheckShape(const char* op, int b, int t, int c, int nh) {
  if (b < 0 || t < 0 || c <= 0 || nh <= 0 || c % nh != 0) {
    return InvalidArgumentError(std::string(op) + ": bad shape (b=" + std::to_string(b) + " t=" + std::to_string(t) +
                                " c=" + std::to_string(c) + " nh=" + std::to_string(nh) + ")");
  }
  return Status::Ok();
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Launchers
//
// Per sequence, head h's Q, K, V are [T][hs] row-major views of qkv with row stride 3C starting at
// columns h*hs, C + h*hs, 2C + h*hs; to cuBLAS (column-major) each is its transpose, hs x T with
// ld = 3C, and head h+1 starts hs elements later (the batch stride). P, dP and dS are [T][T]
// (ld = T, batch stride T*T); Y and dY are [T][hs] views of [T][C] (ld = C, stride hs).
// With X' the column-major view (= X^T):
//   S'  = (K')^T Q'      m = T,  n = T, k = hs   (S = scale Q K^T)
//   Y'  = V' P'          m = hs, n = T, k = T    (Y = P V)
//   dP' = (V')^T dY'     m = T,  n = T, k = hs   (dP = dY V^T)
//   dV' += dY' (P')^T    m = hs, n = T, k = T    (dV += P^T dY)
//   dQ' += K' dS'        m = hs, n = T, k = T    (dQ += scale dS K)
//   dK' += Q' (dS')^T    m = hs, n = T, k = T    (dK += scale dS^T Q)

template <typename T>
Status AttentionForward(const CublasLtContext& ctx, T* out, T* att, const T* qkv, int b, int t, int c, int nh,
                        cudaStream_t stream) {
  DSLAUNCH_RETURN_IF_ERROR(CheckShape("AttentionForward", b, t, c, nh));
  if (b == 0 || t == 0) return Status::Ok();
  if (out == nullptr || att == nullptr || qkv == nullptr) return InvalidArgumentError("AttentionForward: null pointer");
  const int hs = c / nh;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));  // as the CPU op
  const long ld_qkv = 3L * c, square = static_cast<long>(t) * t;
  for (int bi = 0; bi < b; ++bi) {
    const T* q = qkv + static_cast<long>(bi) * t * ld_qkv;
    const MatmulArgs mm{.dtype = kDTypeOf<T>,
                        .trans_a = true,
                        .m = t,
                        .n = t,
                        .k = hs,
                        .a = q + c,  // K
                        .lda = ld_qkv,
                        .stride_a = hs,
                        .b = q,
                        .ldb = ld_qkv,
                        .stride_b = hs,
                        .d = att + static_cast<long>(bi) * nh * square,
                        .ldd = t,
                        .stride_d = square,
                        .batch = nh,
                        .alpha = scale};
    DSLAUNCH_RETURN_IF_ERROR(Matmul(ctx, mm, stream, "AttentionForward(scores)"));
  }
  const long rows = static_cast<long>(b) * nh * t;
  CausalSoftmaxKernel<T><<<static_cast<int>((rows + kRowsPerBlock - 1) / kRowsPerBlock), kRowsPerBlock * kWarpSize, 0,
                           stream>>>(att, rows, t);
  DSLAUNCH_RETURN_IF_ERROR(LaunchStatus("AttentionForward(softmax)"));
  for (int bi = 0; bi < b; ++bi) {
    const MatmulArgs mm{.dtype = kDTypeOf<T>,
                        .m = hs,
                        .n = t,
                        .k = t,
                        .a = qkv + static_cast<long>(bi) * t * ld_qkv + 2L * c,  // V
                        .lda = ld_qkv,
                        .stride_a = hs,
                        .b = att + static_cast<long>(bi) * nh * square,
                        .ldb = t,
                        .stride_b = square,
                        .d = out + static_cast<long>(bi) * t * c,
                        .ldd = c,
                        .stride_d = hs,
                        .batch = nh};
    DSLAUNCH_RETURN_IF_ERROR(Matmul(ctx, mm, stream, "AttentionForward(values)"));
  }
  return Status::Ok();
}

long AttentionBackwardScratchElements(int t, int nh) { return static_cast<long>(nh) * t * t; }

template <typename T>
Status AttentionBackward(const CublasLtContext& ctx, T* dqkv, T* scratch, const T* dout, const T* qkv, const T* att,
                         int b, int t, int c, int nh, cudaStream_t stream) {
  DSLAUNCH_RETURN_IF_ERROR(CheckShape("AttentionBackward", b, t, c, nh));
  if (b == 0 || t == 0) return Status::Ok();
  if (dqkv == nullptr || scratch == nullptr || dout == nullptr || qkv == nullptr || att == nullptr) {
    return InvalidArgumentError("AttentionBackward: null pointer");
  }
  const int hs = c / nh;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const long ld_qkv = 3L * c, square = static_cast<long>(t) * t;
  const long rows = static_cast<long>(nh) * t;
  for (int bi = 0; bi < b; ++bi) {
    const T* q = qkv + static_cast<long>(bi) * t * ld_qkv;
    const T* k = q + c;
    const T* v = q + 2L * c;
    T* dq = dqkv + static_cast<long>(bi) * t * ld_qkv;
    T* dk = dq + c;
    T* dv = dq + 2L * c;
    const T* dy = dout + static_cast<long>(bi) * t * c;
    const T* p = att + static_cast<long>(bi) * nh * square;

    // dP = dY V^T into the scratch.
    const MatmulArgs dp{.dtype = kDTypeOf<T>,
                        .trans_a = true,
                        .m = t,
                        .n = t,
                        .k = hs,
                        .a = v,
                        .lda = ld_qkv,
                        .stride_a = hs,
                        .b = dy,
                        .ldb = c,
                        .stride_b = hs,
                        .d = scratch,
                        .ldd = t,
                        .stride_d = square,
                        .batch = nh};
    DSLAUNCH_RETURN_IF_ERROR(Matmul(ctx, dp, stream, "AttentionBackward(dP)"));

    // dS = P (dP - rowsum(dP P)), in place.
    CausalSoftmaxBackwardKernel<T><<<static_cast<int>((rows + kRowsPerBlock - 1) / kRowsPerBlock),
                                     kRowsPerBlock * kWarpSize, 0, stream>>>(scratch, p, rows, t);
    DSLAUNCH_RETURN_IF_ERROR(LaunchStatus("AttentionBackward(softmax)"));

    // dV += P^T dY.
    const MatmulArgs dvm{.dtype = kDTypeOf<T>,
                         .trans_b = true,
                         .m = hs,
                         .n = t,
                         .k = t,
                         .a = dy,
                         .lda = c,
                         .stride_a = hs,
                         .b = p,
                         .ldb = t,
                         .stride_b = square,
                         .d = dv,
                         .ldd = ld_qkv,
                         .stride_d = hs,
                         .batch = nh,
                         .beta = 1.0f};
    DSLAUNCH_RETURN_IF_ERROR(Matmul(ctx, dvm, stream, "AttentionBackward(dV)"));

    // dQ += scale dS K.
    const MatmulArgs dqm{.dtype = kDTypeOf<T>,
                         .m = hs,
                         .n = t,
                         .k = t,
                         .a = k,
                         .lda = ld_qkv,
                         .stride_a = hs,
                         .b = scratch,
                         .ldb = t,
                         .stride_b = square,
                         .d = dq,
                         .ldd = ld_qkv,
                         .stride_d = hs,
                         .batch = nh,
                         .alpha = scale,
                         .beta = 1.0f};
    DSLAUNCH_RETURN_IF_ERROR(Matmul(ctx, dqm, stream, "AttentionBackward(dQ)"));

    // dK += scale dS^T Q.
    const MatmulArgs dkm{.dtype = kDTypeOf<T>,
                         .trans_b = true,
                         .m = hs,
                         .n = t,
                         .k = t,
                         .a = q,
                         .lda = ld_qkv,
                         .stride_a = hs,
                         .b = scratch,
                         .ldb = t,
                         .stride_b = square,
                         .d = dk,
                         .ldd = ld_qkv,
                         .stride_d = hs,
                         .batch = nh,
                         .alpha = scale,
                         .beta = 1.0f};
    DSLAUNCH_RETURN_IF_ERROR(Matmul(ctx, dkm, stream, "AttentionBackward(dK)"));
  }
  return Status::Ok();
}

#define DSLAUNCH_INSTANTIATE_ATTENTION(T)                                                                       \
  template Status AttentionForward<T>(const CublasLtContext&, T*, T*, const T*, int, int, int, int, cudaStream_t); \
  template Status AttentionBackward<T>(const CublasLtContext&, T*, T*, const T*, const T*, const T*, int, int, int, \
                                       int, cudaStream_t);
DSLAUNCH_INSTANTIATE_ATTENTION(float)
DSLAUNCH_INSTANTIATE_ATTENTION(__nv_bfloat16)
DSLAUNCH_INSTANTIATE_ATTENTION(__half)
#undef DSLAUNCH_INSTANTIATE_ATTENTION

}  // namespace dslaunch::runtime::ops::cuda
