#include <cblas.h>

#include "common/simd_clones.h"
#include "runtime/ops/cpu/linear_rows.h"
#include "runtime/ops/cpu/ops.h"

namespace dslaunch::runtime::ops {
namespace {

// row[cols] += bias[cols].
DSLAUNCH_SIMD_CLONES void AddBiasRow(float* __restrict row, const float* __restrict bias, int cols) {
#pragma omp simd
  for (int o = 0; o < cols; ++o) row[o] += bias[o];
}

// sums[cols] += row[cols].
DSLAUNCH_SIMD_CLONES void AddRow(float* __restrict sums, const float* __restrict row, int cols) {
#pragma omp simd
  for (int o = 0; o < cols; ++o) sums[o] += row[o];
}

}  // namespace

void LinearMatmul(float* out, const float* in, const float* weight, int n, int in_dim, int out_dim) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out_dim, in_dim, 1.0f, in, in_dim, weight, in_dim, 0.0f,
              out, out_dim);
}

void LinearForward(float* out, const float* in, const float* weight, const float* bias, int n, int in_dim,
                   int out_dim) {
  LinearMatmul(out, in, weight, n, in_dim, out_dim);
  if (bias == nullptr) return;
#pragma omp parallel for if (static_cast<long>(n) * out_dim >= kParallelMinElements)
  for (int r = 0; r < n; ++r) AddBiasRow(out + static_cast<long>(r) * out_dim, bias, out_dim);
}

void LinearBackward(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                    const float* weight, int n, int in_dim, int out_dim, GradMode din_mode) {
  if (din != nullptr) {
    const float beta = din_mode == GradMode::kSet ? 0.0f : 1.0f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in_dim, out_dim, 1.0f, dout, out_dim, weight, in_dim,
                beta, din, in_dim);
  }
  if (dweight != nullptr) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out_dim, in_dim, n, 1.0f, dout, out_dim, in, in_dim, 1.0f,
                dweight, in_dim);
  }
  if (dbias != nullptr) {
    for (int r = 0; r < n; ++r) AddRow(dbias, dout + static_cast<long>(r) * out_dim, out_dim);
  }
}

}  // namespace dslaunch::runtime::ops
