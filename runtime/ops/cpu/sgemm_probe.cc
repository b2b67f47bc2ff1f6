#include "runtime/ops/cpu/sgemm_probe.h"

#include <cblas.h>

#include <algorithm>
#include <random>

namespace dslaunch::runtime::ops {

std::string OpenBlasKernelName() { return openblas_get_corename(); }

void RunProduct(const ProductShape& s, const float* x, const float* w, const float* y, float* c) {
  switch (s.product) {
    case LinearProduct::kForward:  // y = x w^T
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.n, s.out, s.in, 1.0f, x, s.in, w, s.in, 0.0f, c, s.out);
      break;
    case LinearProduct::kInputGrad:  // dx = dy w
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.n, s.in, s.out, 1.0f, y, s.out, w, s.in, 0.0f, c, s.in);
      break;
    case LinearProduct::kWeightGrad:  // dw = dy^T x
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s.out, s.in, s.n, 1.0f, y, s.out, x, s.in, 0.0f, c, s.in);
      break;
  }
}

namespace {

// Operand buffers large enough for every product of a list.
struct Operands {
  std::vector<float> x, w, y, c;
  explicit Operands(const std::vector<ProductShape>& products) {
    size_t nx = 0, nw = 0, ny = 0, nc = 0;
    for (const ProductShape& s : products) {
      nx = std::max(nx, static_cast<size_t>(s.n) * s.in);
      nw = std::max(nw, static_cast<size_t>(s.out) * s.in);
      ny = std::max(ny, static_cast<size_t>(s.n) * s.out);
      nc = std::max(nc, static_cast<size_t>(s.m()) * s.cols());
    }
    x.resize(nx), w.resize(nw), y.resize(ny), c.resize(nc);
  }
  void Run(const ProductShape& s) { RunProduct(s, x.data(), w.data(), y.data(), c.data()); }
};

}  // namespace

double TimeProducts(const std::vector<ProductShape>& products, std::chrono::milliseconds budget) {
  Operands ops(products);
  std::mt19937 rng(2026);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto* v : {&ops.x, &ops.w, &ops.y}) {
    for (float& e : *v) e = u(rng);
  }
  ops.Run(products.front());
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  double flops = 0;
  for (size_t i = 0;; i = (i + 1) % products.size()) {
    ops.Run(products[i]);
    flops += products[i].flops();
    if (Clock::now() - start >= budget) break;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return flops / seconds / 1e9;
}

bool KnownProductsExact() {
  // Integers in [-4, 4]: each term is at most 16 and K = 131 terms sum to at most 2,096, far below
  // 2^24, so every correct kernel gives the exact integer whatever its order of summation.
  constexpr int kN = 67, kIn = 131, kOut = 45;
  const std::vector<ProductShape> products = LinearLayerProducts(kN, kIn, kOut);
  Operands ops(products);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> d(-4, 4);
  for (auto* v : {&ops.x, &ops.w, &ops.y}) {
    for (float& e : *v) e = static_cast<float>(d(rng));
  }
  auto at = [](const std::vector<float>& v, int row, int col, int ld) {
    return static_cast<long>(v[static_cast<size_t>(row) * ld + col]);
  };
  for (const ProductShape& s : products) {
    std::fill(ops.c.begin(), ops.c.end(), -1e9f);
    ops.Run(s);
    for (int i = 0; i < s.m(); ++i) {
      for (int j = 0; j < s.cols(); ++j) {
        long want = 0;
        for (int t = 0; t < s.k(); ++t) {
          switch (s.product) {
            case LinearProduct::kForward: want += at(ops.x, i, t, s.in) * at(ops.w, j, t, s.in); break;
            case LinearProduct::kInputGrad: want += at(ops.y, i, t, s.out) * at(ops.w, t, j, s.in); break;
            case LinearProduct::kWeightGrad: want += at(ops.y, t, i, s.out) * at(ops.x, t, j, s.in); break;
          }
        }
        if (ops.c[static_cast<size_t>(i) * s.cols() + j] != static_cast<float>(want)) return false;
      }
    }
  }
  return true;
}

}  // namespace dslaunch::runtime::ops
