#include <cblas.h>

#include "runtime/ops/cpu/ops.h"

namespace dslaunch::runtime::ops {

void LinearForward(float* out, const float* in, const float* weight, const float* bias, int n, int in_dim,
                   int out_dim) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out_dim, in_dim, 1.0f, in, in_dim, weight, in_dim, 0.0f,
              out, out_dim);
  if (bias == nullptr) return;
#pragma omp parallel for if (static_cast<long>(n) * out_dim >= kParallelMinElements)
  for (int r = 0; r < n; ++r) {
    float* row = out + static_cast<long>(r) * out_dim;
    for (int o = 0; o < out_dim; ++o) row[o] += bias[o];
  }
}

void LinearBackward(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                    const float* weight, int n, int in_dim, int out_dim) {
  if (din != nullptr) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in_dim, out_dim, 1.0f, dout, out_dim, weight, in_dim,
                1.0f, din, in_dim);
  }
  if (dweight != nullptr) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out_dim, in_dim, n, 1.0f, dout, out_dim, in, in_dim, 1.0f,
                dweight, in_dim);
  }
  if (dbias != nullptr) {
    for (int r = 0; r < n; ++r) {
      const float* row = dout + static_cast<long>(r) * out_dim;
      for (int o = 0; o < out_dim; ++o) dbias[o] += row[o];
    }
  }
}

}  // namespace dslaunch::runtime::ops
