// A program that calls BLAS's sgemm_ a known number of times through a library it opens with
// dlopen (tests/programs/fortran_sgemm_caller.cc), as Python opens PyTorch: the program itself
// does not link BLAS, so the library's BLAS is outside its global scope. For libdslaunch-blas-time's
// test (tests/benchmarks/blas_time_proc_test.cc):
//
//   sgemm_calls_dlopen LIBRARY CALLS M N K
//
// Each call computes C = A B on M x K and K x N matrices of ones and checks that every element of
// C is K.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: sgemm_calls_dlopen LIBRARY CALLS M N K\n");
    return 2;
  }
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "sgemm_calls_dlopen: %s\n", dlerror());
    return 1;
  }
  using Caller = void (*)(int m, int n, int k, const float* a, const float* b, float* c);
  const auto call = reinterpret_cast<Caller>(dlsym(library, "CallFortranSgemm"));
  if (call == nullptr) {
    std::fprintf(stderr, "sgemm_calls_dlopen: no CallFortranSgemm in %s\n", argv[1]);
    return 1;
  }
  const int calls = std::atoi(argv[2]), m = std::atoi(argv[3]), n = std::atoi(argv[4]), k = std::atoi(argv[5]);
  std::vector<float> a(static_cast<size_t>(m) * k, 1.0f), b(static_cast<size_t>(k) * n, 1.0f),
      c(static_cast<size_t>(m) * n, 0.0f);
  for (int i = 0; i < calls; ++i) {
    call(m, n, k, a.data(), b.data(), c.data());
    for (float x : c) {
      if (x != static_cast<float>(k)) {
        std::fprintf(stderr, "sgemm_calls_dlopen: call %d gave a wrong product\n", i);
        return 1;
      }
    }
  }
  return 0;
}
