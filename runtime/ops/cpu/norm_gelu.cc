// Layer norm and GELU: row-wise and elementwise kernels.
#include <cmath>

#include "runtime/ops/cpu/ops.h"
#include "runtime/ops/cpu/simd_exp.h"

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
// sqrt(2/pi) and the cubic coefficient of GPT-2's tanh approximation of GELU.
constexpr float kGeluScale = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

// tanh(u) = 1 - 2 / (1 + exp(2u)), vectorizable (std::tanh is a scalar libm call); saturates to
// +-1 exactly for |u| > ~9, since SimdExp clamps instead of overflowing.
inline float TanhViaExp(float u) { return 1.0f - 2.0f / (1.0f + SimdExp(2.0f * u)); }
}  // namespace

void GeluForward(float* out, const float* in, long count) {
#pragma omp parallel for simd if (parallel : count >= kParallelMinElements)
  for (long i = 0; i < count; ++i) {
    float x = in[i];
    out[i] = 0.5f * x * (1.0f + TanhViaExp(kGeluScale * (x + kGeluCubic * x * x * x)));
  }
}

void GeluBackward(float* din, const float* dout, const float* in, long count) {
#pragma omp parallel for simd if (parallel : count >= kParallelMinElements)
  for (long i = 0; i < count; ++i) {
    float x = in[i];
    float th = TanhViaExp(kGeluScale * (x + kGeluCubic * x * x * x));
    float sech2 = 1.0f - th * th;
    float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
    din[i] += grad * dout[i];
  }
}

}  // namespace dslaunch::runtime::ops
