// libdslaunch-blas-time.so: how much of a process's time goes to single-precision matrix products.
// Loaded with LD_PRELOAD, it stands in front of the BLAS library for `cblas_sgemm` (the bundled
// runtime's call) and `sgemm_` (the Fortran entry PyTorch calls), forwards each call to the real
// one and times it. A call made from inside another (a cblas_sgemm that calls sgemm_) is counted
// once. At exit it appends one line to the file named by DSLAUNCH_BLAS_TIME_FILE (nothing without
// it):
//
//   rank 0 pid 123 calls 1234 flops 1.6e11 sgemm_s 2.41 span_s 2.73 program dslaunch-worker train
//
// span_s runs from the first call's start to the last call's end: the part of the run that trains
// (start-up and teardown left out), against which sgemm_s is a share. scripts/bench-train.sh uses
// it to bound what any change outside the products could gain (docs/benchmarks.md). One thread per
// process is assumed (the benchmark's OMP_NUM_THREADS=1); calls from several threads would add up.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

namespace {

using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float,
                            float*, int);
using FortranSgemm = void (*)(const char*, const char*, const int*, const int*, const int*, const float*,
                              const float*, const int*, const float*, const int*, const float*, float*, const int*);

double Now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Totals {
  long calls = 0;
  double flops = 0;
  double seconds = 0;
  double first_start = -1;
  double last_end = 0;

  ~Totals() {
    const char* path = std::getenv("DSLAUNCH_BLAS_TIME_FILE");
    if (path == nullptr || calls == 0) return;
    std::string program;
    if (FILE* cmdline = std::fopen("/proc/self/cmdline", "r")) {
      int c = 0;
      int args = 0;
      while ((c = std::fgetc(cmdline)) != EOF && args < 3) {
        if (c == 0) {
          ++args;
          c = ' ';
        }
        program.push_back(static_cast<char>(c));
      }
      std::fclose(cmdline);
    }
    const char* rank = std::getenv("RANK");
    if (FILE* out = std::fopen(path, "a")) {
      std::fprintf(out, "rank %s pid %d calls %ld flops %.6g sgemm_s %.6f span_s %.6f program %s\n",
                   rank != nullptr ? rank : "-", static_cast<int>(getpid()), calls, flops, seconds,
                   last_end - first_start, program.c_str());
      std::fclose(out);
    }
  }
};

Totals totals;
thread_local int depth = 0;

// Times the call of `body` unless it is nested in another timed call.
template <typename Body>
void Timed(double flops, Body body) {
  if (depth++ > 0) {
    body();
    --depth;
    return;
  }
  const double start = Now();
  body();
  const double end = Now();
  --depth;
  totals.calls += 1;
  totals.flops += flops;
  totals.seconds += end - start;
  if (totals.first_start < 0) totals.first_start = start;
  totals.last_end = end;
}

// The real function: the next definition in the global scope, or, for a program that loaded its
// BLAS with dlopen into a scope of its own (Python's extension modules: PyTorch), the already
// loaded BLAS library that defines it.
template <typename Fn>
Fn Next(const char* name) {
  void* symbol = dlsym(RTLD_NEXT, name);
  for (const char* library : {"libblas.so.3", "libopenblas.so.0"}) {
    if (symbol != nullptr) break;
    if (void* handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD)) symbol = dlsym(handle, name);
  }
  if (symbol == nullptr) {
    // An interposed sgemm has no way to report an error, and one that computed nothing would be
    // silent: the process stops here, saying why.
    std::fprintf(stderr, "libdslaunch-blas-time: no %s in the libraries this process loaded\n", name);
    std::abort();
  }
  return reinterpret_cast<Fn>(symbol);
}

}  // namespace

extern "C" {

void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc) {
  static const CblasSgemm next = Next<CblasSgemm>("cblas_sgemm");
  Timed(2.0 * m * n * k, [&] { next(order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); });
}

void sgemm_(const char* trans_a, const char* trans_b, const int* m, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c,
            const int* ldc) {
  static const FortranSgemm next = Next<FortranSgemm>("sgemm_");
  Timed(2.0 * *m * *n * *k, [&] { next(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); });
}

}  // extern "C"
