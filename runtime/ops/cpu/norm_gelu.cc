// Layer norm and GELU: row-wise and elementwise kernels.
#include <algorithm>
#include <cmath>

#include "common/simd_clones.h"
#include "runtime/ops/cpu/gelu.h"
#include "runtime/ops/cpu/ops.h"

namespace dslaunch::runtime::ops {

void LayerNormForward(float* out, float* mean, float* rstd, const float* in, const float* weight,
                      const float* bias, int n, int c) {
#pragma omp parallel for if (static_cast<long>(n) * c >= kParallelMinElements)
  for (int r = 0; r < n; ++r) {
    const float* x = in + static_cast<long>(r) * c;
    float* y = out + static_cast<long>(r) * c;
    float m = 0.0f;
#pragma omp simd reduction(+ : m)
    for (int i = 0; i < c; ++i) m += x[i];
    m /= static_cast<float>(c);
    float v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (int i = 0; i < c; ++i) v += (x[i] - m) * (x[i] - m);
    v /= static_cast<float>(c);
    float s = 1.0f / std::sqrt(v + kLayerNormEps);
#pragma omp simd
    for (int i = 0; i < c; ++i) y[i] = (x[i] - m) * s * weight[i] + bias[i];
    mean[r] = m;
    rstd[r] = s;
  }
}

void LayerNormBackward(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                       const float* weight, const float* mean, const float* rstd, int n, int c) {
  for (int r = 0; r < n; ++r) {
    const float* x = in + static_cast<long>(r) * c;
    const float* dy = dout + static_cast<long>(r) * c;
    float* dx = din + static_cast<long>(r) * c;
    const float m = mean[r];
    const float s = rstd[r];
    // mean over the row of dnorm and of dnorm * xhat, where dnorm = dy * weight.
    float dnorm_mean = 0.0f, dnorm_xhat_mean = 0.0f;
#pragma omp simd reduction(+ : dnorm_mean, dnorm_xhat_mean)
    for (int i = 0; i < c; ++i) {
      float xhat = (x[i] - m) * s;
      float dnorm = dy[i] * weight[i];
      dnorm_mean += dnorm;
      dnorm_xhat_mean += dnorm * xhat;
    }
    dnorm_mean /= static_cast<float>(c);
    dnorm_xhat_mean /= static_cast<float>(c);
#pragma omp simd
    for (int i = 0; i < c; ++i) {
      float xhat = (x[i] - m) * s;
      float dnorm = dy[i] * weight[i];
      dbias[i] += dy[i];
      dweight[i] += dy[i] * xhat;
      dx[i] += (dnorm - dnorm_mean - xhat * dnorm_xhat_mean) * s;
    }
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
