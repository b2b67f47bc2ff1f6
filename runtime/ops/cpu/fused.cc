// Linear layers fused with the elementwise pass that follows them (ops.h, "Fused"): each row is
// finished in one pass after the sgemm instead of two, and GELU's backward adds the bias gradient
// as it writes each row. The arithmetic and its order are the unfused ops', so are the bits.
#include "common/simd_clones.h"
#include "runtime/ops/cpu/gelu.h"
#include "runtime/ops/cpu/linear_rows.h"
#include "runtime/ops/cpu/ops.h"

namespace dslaunch::runtime::ops {
namespace {

DSLAUNCH_SIMD_CLONES void BiasGeluRow(float* __restrict pre, float* __restrict out, const float* __restrict bias,
                                      int cols) {
#pragma omp simd
  for (int o = 0; o < cols; ++o) {
    const float x = pre[o] + bias[o];
    pre[o] = x;
    out[o] = Gelu(x);
  }
}

DSLAUNCH_SIMD_CLONES void BiasResidualRow(float* __restrict row, const float* __restrict bias,
                                          const float* __restrict residual, int cols) {
#pragma omp simd
  for (int o = 0; o < cols; ++o) row[o] = (row[o] + bias[o]) + residual[o];
}

DSLAUNCH_SIMD_CLONES void GeluGradBiasRow(float* __restrict din, float* __restrict dbias, const float* __restrict dout,
                                          const float* __restrict in, int cols) {
#pragma omp simd
  for (int o = 0; o < cols; ++o) {
    // 0 + x, as the unfused op's add into a zeroed buffer: -0 (a saturated GELU's zero slope times
    // a negative dout) becomes +0 there too.
    const float d = 0.0f + GeluGrad(in[o]) * dout[o];
    din[o] = d;
    dbias[o] += d;
  }
}

}  // namespace

void LinearGeluForward(float* pre, float* out, const float* in, const float* weight, const float* bias, int n,
                       int in_dim, int out_dim) {
  LinearMatmul(pre, in, weight, n, in_dim, out_dim);
#pragma omp parallel for if (static_cast<long>(n) * out_dim >= kParallelMinElements)
  for (int r = 0; r < n; ++r) {
    const long at = static_cast<long>(r) * out_dim;
    BiasGeluRow(pre + at, out + at, bias, out_dim);
  }
}

void LinearResidualForward(float* out, const float* in, const float* weight, const float* bias,
                           const float* residual, int n, int in_dim, int out_dim) {
  LinearMatmul(out, in, weight, n, in_dim, out_dim);
  BiasResidualForward(out, bias, residual, n, out_dim);
}

void BiasResidualForward(float* out, const float* bias, const float* residual, int n, int c) {
#pragma omp parallel for if (static_cast<long>(n) * c >= kParallelMinElements)
  for (int r = 0; r < n; ++r) {
    const long at = static_cast<long>(r) * c;
    BiasResidualRow(out + at, bias, residual + at, c);
  }
}

// Rows in order on one thread: the bias sums add them in the unfused op's order.
void GeluBackwardBias(float* din, float* dbias, const float* dout, const float* in, int n, int cols) {
  for (int r = 0; r < n; ++r) {
    const long at = static_cast<long>(r) * cols;
    GeluGradBiasRow(din + at, dbias, dout + at, in + at, cols);
  }
}

}  // namespace dslaunch::runtime::ops
