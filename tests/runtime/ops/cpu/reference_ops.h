// Double-precision reference implementations of the forward kernels of runtime/ops/cpu/ops.h, written
// from the formulas (docs/model.md) and sharing nothing with the code under test: no
// ops::kLayerNormEps, no SimdExp, no BLAS. The constants are GPT-2's, spelled out here:
// layer norm's epsilon 1e-5 and GELU's tanh approximation with 0.044715 and sqrt(2/pi).
// Plain loops in the obvious order; inputs are the kernels' float inputs, widened exactly.
#pragma once

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace dslaunch::runtime::reference {

// GPT-2's layer-norm epsilon (the released model's `layer_norm_epsilon`).
inline constexpr double kLayerNormEps = 1e-5;
// The cubic coefficient of GELU's tanh approximation (Hendrycks and Gimpel 2016, eq. in sec. 2).
inline constexpr double kGeluCubic = 0.044715;

// y[n][out_dim] = x[n][in_dim] w[out_dim][in_dim]^T + b[out_dim] (b may be null).
inline std::vector<double> Linear(const float* x, const float* w, const float* b, int n, int in_dim, int out_dim) {
  std::vector<double> y(static_cast<size_t>(n) * out_dim);
  for (int r = 0; r < n; ++r) {
    for (int o = 0; o < out_dim; ++o) {
      double s = b != nullptr ? double{b[o]} : 0.0;
      for (int k = 0; k < in_dim; ++k) s += double{x[r * in_dim + k]} * w[o * in_dim + k];
      y[static_cast<size_t>(r) * out_dim + o] = s;
    }
  }
  return y;
}

// Per row of x[n][c]: mean, biased variance, rstd = 1/sqrt(var + eps), y = (x - mean) rstd w + b.
struct LayerNormResult {
  std::vector<double> y, mean, rstd;
};
inline LayerNormResult LayerNorm(const float* x, const float* w, const float* b, int n, int c) {
  LayerNormResult r;
  r.y.resize(static_cast<size_t>(n) * c);
  for (int i = 0; i < n; ++i) {
    const float* row = x + static_cast<size_t>(i) * c;
    double mean = 0.0;
    for (int k = 0; k < c; ++k) mean += row[k];
    mean /= c;
    double var = 0.0;
    for (int k = 0; k < c; ++k) var += (row[k] - mean) * (row[k] - mean);
    var /= c;
    const double rstd = 1.0 / std::sqrt(var + kLayerNormEps);
    for (int k = 0; k < c; ++k) r.y[static_cast<size_t>(i) * c + k] = (row[k] - mean) * rstd * w[k] + b[k];
    r.mean.push_back(mean);
    r.rstd.push_back(rstd);
  }
  return r;
}

// GELU, GPT-2's tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline double Gelu(double x) {
  const double s = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + std::tanh(s * (x + kGeluCubic * x * x * x)));
}

// softmax(z)_j = exp(z_j - max z) / sum_k exp(z_k - max z).
inline std::vector<double> Softmax(const float* z, int len) {
  const double mx = *std::max_element(z, z + len);
  std::vector<double> p(static_cast<size_t>(len));
  double sum = 0.0;
  for (int j = 0; j < len; ++j) sum += (p[j] = std::exp(z[j] - mx));
  for (double& e : p) e /= sum;
  return p;
}

// -log softmax(z)[target] = log sum_k exp(z_k - max z) - (z[target] - max z).
inline double CrossEntropy(const float* z, int len, int target) {
  const double mx = *std::max_element(z, z + len);
  double sum = 0.0;
  for (int j = 0; j < len; ++j) sum += std::exp(z[j] - mx);
  return std::log(sum) - (z[target] - mx);
}

}  // namespace dslaunch::runtime::reference
