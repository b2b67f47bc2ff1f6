// Layer norm over the last dimension and its backward (docs/model.md): one warp per row for the
// row statistics and the input gradient, column sums for the weight and bias gradients.
#include <cmath>

#include "runtime/ops/cuda/cuda_status.h"
#include "runtime/ops/cuda/device_math.cuh"
#include "runtime/ops/cuda/ops.h"

namespace dslaunch::runtime::ops::cuda {
namespace {

// Rows per block of the row kernels (a warp each): 256 threads.
constexpr int kRowsPerBlock = 8;
// The parameter-gradient kernel: kColumnTile adjacent columns (one per lane, coalesced reads of
// each row) times kRowLanes threads down the rows; each block adds its fp32 totals once.
constexpr int kColumnTile = 32;
constexpr int kRowLanes = 16;

// ------------------------------------------------------------------------------------------------
// Kernels

// Two passes over the row (mean, then the variance of x - mean), as the CPU op: no cancellation
// from E[x^2] - E[x]^2.
template <typename T>
__global__ void LayerNormForwardKernel(T* out, float* mean, float* rstd, const T* in, const T* weight, const T* bias,
                                       int n, int c) {
  const int lane = threadIdx.x % kWarpSize;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= n) return;  // the whole warp leaves together, so the shuffles below see full warps
  const T* x = in + static_cast<long>(row) * c;
  T* y = out + static_cast<long>(row) * c;
  float sum = 0.0f;
  for (int i = lane; i < c; i += kWarpSize) sum += ToFloat(x[i]);
  const float m = WarpSum(sum) / static_cast<float>(c);
  float sq = 0.0f;
  for (int i = lane; i < c; i += kWarpSize) {
    const float d = ToFloat(x[i]) - m;
    sq += d * d;
  }
  const float var = WarpSum(sq) / static_cast<float>(c);
  const float s = 1.0f / sqrtf(var + kLayerNormEps);
  for (int i = lane; i < c; i += kWarpSize) {
    y[i] = FromFloat<T>((ToFloat(x[i]) - m) * s * ToFloat(weight[i]) + ToFloat(bias[i]));
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// din += rstd (dnorm - mean(dnorm) - xhat mean(dnorm xhat)), dnorm = dout * weight.
template <typename T>
__global__ void LayerNormInputGradKernel(T* din, const T* dout, const T* in, const T* weight, const float* mean,
                                         const float* rstd, int n, int c) {
  const int lane = threadIdx.x % kWarpSize;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= n) return;
  const long base = static_cast<long>(row) * c;
  const float m = mean[row], s = rstd[row];
  float dnorm_sum = 0.0f, dnorm_xhat_sum = 0.0f;
  for (int i = lane; i < c; i += kWarpSize) {
    const float xhat = (ToFloat(in[base + i]) - m) * s;
    const float dnorm = ToFloat(dout[base + i]) * ToFloat(weight[i]);
    dnorm_sum += dnorm;
    dnorm_xhat_sum += dnorm * xhat;
  }
  const float dnorm_mean = WarpSum(dnorm_sum) / static_cast<float>(c);
  const float dnorm_xhat_mean = WarpSum(dnorm_xhat_sum) / static_cast<float>(c);
  for (int i = lane; i < c; i += kWarpSize) {
    const float xhat = (ToFloat(in[base + i]) - m) * s;
    const float dnorm = ToFloat(dout[base + i]) * ToFloat(weight[i]);
    din[base + i] = FromFloat<T>(ToFloat(din[base + i]) + (dnorm - dnorm_mean - xhat * dnorm_xhat_mean) * s);
  }
}

// dweight[i] += sum_r dout[r][i] xhat[r][i]; dbias[i] += sum_r dout[r][i].
template <typename T>
__global__ void LayerNormParamGradKernel(T* dweight, T* dbias, const T* dout, const T* in, const float* mean,
                                         const float* rstd, int n, int c) {
  __shared__ float partial_w[kRowLanes][kColumnTile];
  __shared__ float partial_b[kRowLanes][kColumnTile];
  const int col = blockIdx.x * kColumnTile + threadIdx.x;
  float sum_w = 0.0f, sum_b = 0.0f;
  if (col < c) {
    for (int r = threadIdx.y; r < n; r += kRowLanes) {
      const long i = static_cast<long>(r) * c + col;
      const float dy = ToFloat(dout[i]);
      sum_w += dy * (ToFloat(in[i]) - mean[r]) * rstd[r];
      sum_b += dy;
    }
  }
  partial_w[threadIdx.y][threadIdx.x] = sum_w;
  partial_b[threadIdx.y][threadIdx.x] = sum_b;
  __syncthreads();
  if (threadIdx.y == 0 && col < c) {
    float total_w = 0.0f, total_b = 0.0f;
    for (int y = 0; y < kRowLanes; ++y) {
      total_w += partial_w[y][threadIdx.x];
      total_b += partial_b[y][threadIdx.x];
    }
    dweight[col] = FromFloat<T>(ToFloat(dweight[col]) + total_w);
    dbias[col] = FromFloat<T>(ToFloat(dbias[col]) + total_b);
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Launchers

template <typename T>
Status LayerNormForward(T* out, float* mean, float* rstd, const T* in, const T* weight, const T* bias, int n, int c,
                        cudaStream_t stream) {
  if (n < 0 || c <= 0) return InvalidArgumentError("LayerNormForward: bad shape");
  if (n == 0) return Status::Ok();
  if (out == nullptr || mean == nullptr || rstd == nullptr || in == nullptr || weight == nullptr || bias == nullptr) {
    return InvalidArgumentError("LayerNormForward: null pointer");
  }
  const int grid = (n + kRowsPerBlock - 1) / kRowsPerBlock;
  LayerNormForwardKernel<T><<<grid, kRowsPerBlock * kWarpSize, 0, stream>>>(out, mean, rstd, in, weight, bias, n, c);
  return LaunchStatus("LayerNormForward");
}

template <typename T>
Status LayerNormBackward(T* din, T* dweight, T* dbias, const T* dout, const T* in, const T* weight,
                         const float* mean, const float* rstd, int n, int c, cudaStream_t stream) {
  if (n < 0 || c <= 0) return InvalidArgumentError("LayerNormBackward: bad shape");
  if (n == 0) return Status::Ok();
  if (din == nullptr || dweight == nullptr || dbias == nullptr || dout == nullptr || in == nullptr ||
      weight == nullptr || mean == nullptr || rstd == nullptr) {
    return InvalidArgumentError("LayerNormBackward: null pointer");
  }
  const int row_grid = (n + kRowsPerBlock - 1) / kRowsPerBlock;
  LayerNormInputGradKernel<T>
      <<<row_grid, kRowsPerBlock * kWarpSize, 0, stream>>>(din, dout, in, weight, mean, rstd, n, c);
  DSLAUNCH_RETURN_IF_ERROR(LaunchStatus("LayerNormBackward(din)"));
  const dim3 block(kColumnTile, kRowLanes);
  const int col_grid = (c + kColumnTile - 1) / kColumnTile;
  LayerNormParamGradKernel<T><<<col_grid, block, 0, stream>>>(dweight, dbias, dout, in, mean, rstd, n, c);
  return LaunchStatus("LayerNormBackward(dweight, dbias)");
}

#define DSLAUNCH_INSTANTIATE_LAYER_NORM(T)                                                                    \
  template Status LayerNormForward<T>(T*, float*, float*, const T*, const T*, const T*, int, int, cudaStream_t); \
  template Status LayerNormBackward<T>(T*, T*, T*, const T*, const T*, const T*, const float*, const float*, int, \
                                       int, cudaStream_t);
DSLAUNCH_INSTANTIATE_LAYER_NORM(float)
DSLAUNCH_INSTANTIATE_LAYER_NORM(__nv_bfloat16)
DSLAUNCH_INSTANTIATE_LAYER_NORM(__half)
#undef DSLAUNCH_INSTANTIATE_LAYER_NORM

}  // namespace dslaunch::runtime::ops::cuda
