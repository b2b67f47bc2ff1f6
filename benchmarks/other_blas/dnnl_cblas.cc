// The calls of gemm_bench.cc and runtime/ops/cpu/sgemm_probe.cc answered by oneDNN (libdnnl-dev,
// 2.6): cblas_sgemm through dnnl_sgemm, whose arguments are row-major (a column-major call is
// the transposed row-major product), so that scripts/bench-blas.sh can time oneDNN on the same
// products. Not part of the CMake build: oneDNN is not a dependency.
#include <cblas.h>
#include <dnnl.h>

#include <string>

extern "C" {
void cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta, const enum CBLAS_TRANSPOSE tb,
                 const blasint m, const blasint n, const blasint k, const float alpha, const float* a,
                 const blasint lda, const float* b, const blasint ldb, const float beta, float* c,
                 const blasint ldc) {
  const char op_a = ta == CblasNoTrans ? 'N' : 'T', op_b = tb == CblasNoTrans ? 'N' : 'T';
  if (order == CblasRowMajor) {
    dnnl_sgemm(op_a, op_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {  // column-major C = A B is row-major C^T = B^T A^T
    dnnl_sgemm(op_b, op_a, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
  }
}

char* openblas_get_config() {
  const dnnl_version_t* v = dnnl_version();
  static std::string text = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                            std::to_string(v->patch);
  return text.data();
}
char* openblas_get_corename() {
  static std::string name = "oneDNN";
  return name.data();
}
int openblas_get_num_threads() { return -1; }
}
