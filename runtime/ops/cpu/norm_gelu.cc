// Layer norm and GELU: row-wise and elementwise kernels.
#include <algorithm>
#include <cmath>

#include "common/simd_clones.h"
#include "runtime/ops/cpu/gelu.h"
#include "runtime/ops/cpu/lane_sum.h"
#include "runtime/ops/cpu/ops.h"

namespace dslaunch::runtime::ops {

namespace {

// One row of each direction, cloned for AVX-512 and AVX2; the row sums are LaneSums, so every
// clone gives the same bits.
DSLAUNCH_SIMD_CLONES void LayerNormRow(float* __restrict y, float* mean, float* rstd, const float* __restrict x,
                                       const float* __restrict weight, const float* __restrict bias, int c) {
  const float m = LaneSum(c, [&](int i) { return x[i]; }) / static_cast<float>(c);
  const float v = LaneSum(c, [&](int i) { return (x[i] - m) * (x[i] - m); }) / static_cast<float>(c);
  const float s = 1.0f / std::sqrt(v + kLayerNormEps);
#pragma omp simd
  for (int i = 0; i < c; ++i) y[i] = (x[i] - m) * s * weight[i] + bias[i];
  *mean = m;
  *rstd = s;
}

DSLAUNCH_SIMD_CLONES void LayerNormBackwardRow(float* __restrict dx, float* __restrict dweight,
                                               float* __restrict dbias, const float* __restrict dy,
                                               const float* __restrict x, const float* __restrict weight, float m,
                                               float s, int c) {
  // The means over the row of dnorm and of dnorm * xhat, where dnorm = dy * weight.
  const float dnorm_mean = LaneSum(c, [&](int i) { return dy[i] * weight[i]; }) / static_cast<float>(c);
  const float dnorm_xhat_mean =
      LaneSum(c, [&](int i) { return dy[i] * weight[i] * ((x[i] - m) * s); }) / static_cast<float>(c);
#pragma omp simd
  for (int i = 0; i < c; ++i) {
    const float xhat = (x[i] - m) * s;
    const float dnorm = dy[i] * weight[i];
    dbias[i] += dy[i];
    dweight[i] += dy[i] * xhat;
    dx[i] += (dnorm - dnorm_mean - xhat * dnorm_xhat_mean) * s;
  }
}

}  // namespace

void LayerNormForward(float* out, float* mean, float* rstd, const float* in, const float* weight,
                      const float* bias, int n, int c) {
#pragma omp parallel for if (static_cast<long>(n) * c >= kParallelMinElements)
  for (int r = 0; r < n; ++r) {
    const long at = static_cast<long>(r) * c;
    LayerNormRow(out + at, mean + r, rstd + r, in + at, weight, bias, c);
  }
}

// Rows in order: the weight and bias gradients add them in that order.
void LayerNormBackward(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                       const float* weight, const float* mean, const float* rstd, int n, int c) {
  for (int r = 0; r < n; ++r) {
    const long at = static_cast<long>(r) * c;
    LayerNormBackwardRow(din + at, dweight, dbias, dout + at, in + at, weight, mean[r], rstd[r], c);
  }
}

namespace {

// The elementwise loops, cloned for AVX-512 and AVX2 (common/simd_clones.h); the callers split
// the work into chunks over OpenMP threads.
DSLAUNCH_SIMD_CLONES void GeluRange(float* __restrict out, const float* __restrict in, long count) {
#pragma omp simd
  for (long i = 0; i < count; ++i) out[i] = Gelu(in[i]);
}

DSLAUNCH_SIMD_CLONES void GeluGradRange(float* __restrict din, const float* __restrict dout,
                                        const float* __restrict in, long count) {
#pragma omp simd
  for (long i = 0; i < count; ++i) din[i] += GeluGrad(in[i]) * dout[i];
}

// Elements per chunk of work: a few pages, so that OpenMP threads split a long array evenly.
constexpr long kChunk = 4096;

}  // namespace

void GeluForward(float* out, const float* in, long count) {
#pragma omp parallel for if (count >= kParallelMinElements)
  for (long at = 0; at < count; at += kChunk) GeluRange(out + at, in + at, std::min(kChunk, count - at));
}

void GeluBackward(float* din, const float* dout, const float* in, long count) {
#pragma omp parallel for if (count >= kParallelMinElements)
  for (long at = 0; at < count; at += kChunk) {
    GeluGradRange(din + at, dout + at, in + at, std::min(kChunk, count - at));
  }
}

}  // namespace dslaunch::runtime::ops
