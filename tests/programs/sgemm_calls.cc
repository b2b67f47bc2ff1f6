// A program that makes a known number of cblas_sgemm calls, linked to OpenBLAS as the bundled
// runtime is, for libdslaunch-blas-time's test (tests/benchmarks/blas_time_proc_test.cc):
//
//   sgemm_calls CALLS M N K
//
// Each call computes C = A B on M x K and K x N matrices of ones and checks that every element of
// C is K, so that an interposed call that did not reach the real one is seen.
// tests/programs/sgemm_calls_dlopen.cc is the same through a library opened with dlopen.
#include <cblas.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: sgemm_calls CALLS M N K\n");
    return 2;
  }
  const int calls = std::atoi(argv[1]), m = std::atoi(argv[2]), n = std::atoi(argv[3]), k = std::atoi(argv[4]);
  std::vector<float> a(static_cast<size_t>(m) * k, 1.0f), b(static_cast<size_t>(k) * n, 1.0f),
      c(static_cast<size_t>(m) * n, 0.0f);
  for (int i = 0; i < calls; ++i) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    for (float x : c) {
      if (x != static_cast<float>(k)) {
        std::fprintf(stderr, "sgemm_calls: call %d gave a wrong product\n", i);
        return 1;
      }
    }
  }
  return 0;
}
