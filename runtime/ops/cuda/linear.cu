// Linear layer: y = x W^T + b and its backward (docs/model.md), the products on cuBLASLt
// (matmul.h), the bias and its gradient as small kernels.
#include "runtime/ops/cuda/cuda_status.h"
#include "runtime/ops/cuda/device_math.cuh"
#include "runtime/ops/cuda/matmul.h"
#include "runtime/ops/cuda/ops.h"

namespace dslaunch::runtime::ops::cuda {
namespace {

// Column sums: a block covers kColumnTile adjacent columns (one per lane, so each row's read is
// coalesced) and kRowLanes threads down the rows, then adds its fp32 total into the output once.
// Deterministic; enough blocks for C >= 768 to spread over the SMs.
constexpr int kColumnTile = 32;
constexpr int kRowLanes = 16;

// ------------------------------------------------------------------------------------------------
// Kernels

// out[r][o] = bias[o]: the matmul then adds x W^T with beta = 1, in its fp32 accumulator.
template <typename T>
__global__ void BroadcastBiasKernel(T* out, const T* bias, long n, int out_dim) {
  const long total = n * out_dim;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    out[i] = bias[i % out_dim];
  }
}

// dbias[o] += sum_r dout[r][o].
template <typename T>
__global__ void BiasGradKernel(T* dbias, const T* dout, int n, int out_dim) {
  __shared__ float partial[kRowLanes][kColumnTile];
  const int col = blockIdx.x * kColumnTile + threadIdx.x;
  float sum = 0.0f;
  if (col < out_dim) {
    for (int r = threadIdx.y; r < n; r += kRowLanes) sum += ToFloat(dout[static_cast<long>(r) * out_dim + col]);
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < out_dim) {
    float total = 0.0f;
    for (int y = 0; y < kRowLanes; ++y) total += partial[y][threadIdx.x];
    dbias[col] = FromFloat<T>(ToFloat(dbias[col]) + total);
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Launchers
//
// Row-major X[rows][cols] is, to cuBLAS, the column-major cols x rows matrix X^T with ld = cols.
// So with x' = x^T (in_dim x n), W' = W^T (in_dim x out_dim), y' = y^T (out_dim x n):
//   forward   y' = (W')^T x'          m = out_dim, n = n,      k = in_dim   (A = W' transposed)
//   din'     += W' dout'              m = in_dim,  n = n,      k = out_dim
//   dW'      += x' (dout')^T          m = in_dim,  n = out_dim, k = n       (B = dout' transposed)

template <typename T>
Status LinearForward(const CublasLtContext& ctx, T* out, const T* in, const T* weight, const T* bias, int n,
                     int in_dim, int out_dim, cudaStream_t stream) {
  constexpr char kOp[] = "LinearForward";
  if (n < 0 || in_dim <= 0 || out_dim <= 0) return InvalidArgumentError("LinearForward: bad shape");
  if (n == 0) return Status::Ok();
  if (out == nullptr || in == nullptr || weight == nullptr) return InvalidArgumentError("LinearForward: null pointer");
  if (bias != nullptr) {
    BroadcastBiasKernel<T><<<GridFor(static_cast<long>(n) * out_dim, kElementwiseThreads), kElementwiseThreads, 0,
                             stream>>>(out, bias, n, out_dim);
    DSLAUNCH_RETURN_IF_ERROR(LaunchStatus(kOp));
  }
  const MatmulArgs mm{.dtype = kDTypeOf<T>,
                      .trans_a = true,
                      .m = out_dim,
                      .n = n,
                      .k = in_dim,
                      .a = weight,
                      .lda = in_dim,
                      .b = in,
                      .ldb = in_dim,
                      .d = out,
                      .ldd = out_dim,
                      .beta = bias != nullptr ? 1.0f : 0.0f};
  return Matmul(ctx, mm, stream, kOp);
}

template <typename T>
Status LinearBackward(const CublasLtContext& ctx, T* din, T* dweight, T* dbias, const T* dout, const T* in,
                      const T* weight, int n, int in_dim, int out_dim, cudaStream_t stream) {
  constexpr char kOp[] = "LinearBackward";
  if (n < 0 || in_dim <= 0 || out_dim <= 0) return InvalidArgumentError("LinearBackward: bad shape");
  if (n == 0) return Status::Ok();
  if (dout == nullptr) return InvalidArgumentError("LinearBackward: null dout");
  if (din != nullptr) {
    if (weight == nullptr) return InvalidArgumentError("LinearBackward: din needs weight");
    const MatmulArgs mm{.dtype = kDTypeOf<T>,
                        .m = in_dim,
                        .n = n,
                        .k = out_dim,
                        .a = weight,
                        .lda = in_dim,
                        .b = dout,
                        .ldb = out_dim,
                        .d = din,
                        .ldd = in_dim,
                        .beta = 1.0f};
    DSLAUNCH_RETURN_IF_ERROR(Matmul(ctx, mm, stream, "LinearBackward(din)"));
  }
  if (dweight != nullptr) {
    if (in == nullptr) return InvalidArgumentError("LinearBackward: dweight needs in");
    const MatmulArgs mm{.dtype = kDTypeOf<T>,
                        .trans_b = true,
                        .m = in_dim,
                        .n = out_dim,
                        .k = n,
                        .a = in,
                        .lda = in_dim,
                        .b = dout,
                        .ldb = out_dim,
                        .d = dweight,
                        .ldd = in_dim,
                        .beta = 1.0f};
    DSLAUNCH_RETURN_IF_ERROR(Matmul(ctx, mm, stream, "LinearBackward(dweight)"));
  }
  if (dbias != nullptr) {
    const dim3 block(kColumnTile, kRowLanes);
    const int grid = (out_dim + kColumnTile - 1) / kColumnTile;
    BiasGradKernel<T><<<grid, block, 0, stream>>>(dbias, dout, n, out_dim);
    DSLAUNCH_RETURN_IF_ERROR(LaunchStatus(kOp));
  }
  return Status::Ok();
}

#define DSLAUNCH_INSTANTIATE_LINEAR(T)                                                                          \
  template Status LinearForward<T>(const CublasLtContext&, T*, const T*, const T*, const T*, int, int, int,     \
                                   cudaStream_t);                                                               \
  template Status LinearBackward<T>(const CublasLtContext&, T*, T*, T*, const T*, const T*, const T*, int, int, \
                                    int, cudaStream_t);
DSLAUNCH_INSTANTIATE_LINEAR(float)
DSLAUNCH_INSTANTIATE_LINEAR(__nv_bfloat16)
DSLAUNCH_INSTANTIATE_LINEAR(__half)
#undef DSLAUNCH_INSTANTIATE_LINEAR

}  // namespace dslaunch::runtime::ops::cuda
