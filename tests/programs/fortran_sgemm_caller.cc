// A shared library that calls BLAS's Fortran sgemm_, as libtorch_cpu does: loaded with dlopen by
// tests/programs/sgemm_calls_dlopen.cc to test libdslaunch-blas-time on such a program.
extern "C" {

void sgemm_(const char* trans_a, const char* trans_b, const int* m, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c,
            const int* ldc);

// C (m x n) = A (m x k) B (k x n), all row-major: column-major C^T = B^T A^T.
void CallFortranSgemm(int m, int n, int k, const float* a, const float* b, float* c) {
  const float one = 1.0f, zero = 0.0f;
  sgemm_("N", "N", &n, &m, &k, &one, b, &n, a, &k, &zero, c, &n);
}

}  // extern "C"
