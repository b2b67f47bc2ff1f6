// The bundled AdamW update (runtime/engine/optimizer.h, called as the engine calls it) in GB/s of
// optimizer state: 16 bytes per element (fp32 parameter, gradient and two moments), the bytes an
// offloaded step must bring in per element, so the figure compares with swap_bench's disk rates
// and its triad. Median of --iters timed steps after one warm-up step, one thread; one step on
// fresh state is checked against the formula in double precision first.
// Built with the benchmarks, not registered with CTest; scripts/bench-offload-io.sh runs it.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "runtime/engine/optimizer.h"

namespace {

using namespace dslaunch::runtime;
using Clock = std::chrono::steady_clock;

// Bytes of state per element: parameter, gradient, first and second moment, fp32 each.
constexpr double kStateBytesPerElement = 16.0;

OptimizerParams AdamW() { return {OptimizerKind::kAdamW, 1e-3, 0.9, 0.999, 1e-8, 0.01, 0.0}; }

void Fill(std::vector<float>& v, float scale, unsigned seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (auto& e : v) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    e = scale * (static_cast<float>(x % 20001) / 10000.0f - 1.0f);
  }
}

// One step from zero moments, element i, in double: p - lr wd p - lr g / (|g| + eps) at t = 1.
bool CheckFirstStep(size_t n) {
  OptimizerParams p = AdamW();
  std::vector<float> w(n), g(n);
  Fill(w, 1.0f, 1);
  Fill(g, 0.1f, 2);
  std::vector<float> w0 = w;
  auto state = OptimizerState::For(p, n);
  OptimizerStep(p, p.lr, w, g, {{0, n, true}}, state);
  for (size_t i : {size_t{0}, n / 2, n - 1}) {
    double d = w0[i] - p.lr * p.weight_decay * w0[i];
    double want = d - p.lr * g[i] / (std::fabs(static_cast<double>(g[i])) + p.eps);
    if (std::fabs(want - w[i]) > 1e-6 * (1 + std::fabs(want))) {
      std::fprintf(stderr, "optimizer_bench: element %zu: got %.9g, formula %.9g\n", i, w[i], want);
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes = {1 << 20, 16 << 20, 64 << 20};
  int iters = 5;
  CLI::App app{"optimizer_bench: the bundled AdamW update in GB/s of state", "optimizer_bench"};
  app.add_option("--sizes", sizes, "elements per run");
  app.add_option("--iters", iters, "timed steps per size (median reported)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (!CheckFirstStep(4096)) return 1;
  std::printf("optimizer_bench: AdamW (runtime/engine/optimizer.h), 1 thread, %g bytes of state per element\n",
              kStateBytesPerElement);
  for (size_t n : sizes) {
    OptimizerParams p = AdamW();
    std::vector<float> w(n), g(n);
    Fill(w, 1.0f, 3);
    Fill(g, 0.1f, 4);
    auto state = OptimizerState::For(p, n);
    std::vector<double> rates;
    for (int i = 0; i <= iters; ++i) {
      auto start = Clock::now();
      OptimizerStep(p, p.lr, w, g, {{0, n, true}}, state);
      double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      if (i > 0) rates.push_back(kStateBytesPerElement * n / seconds / 1e9);
    }
    std::sort(rates.begin(), rates.end());
    if (!std::isfinite(w[n / 2])) {
      std::fprintf(stderr, "optimizer_bench: non-finite parameter after %d steps\n", iters + 1);
      return 1;
    }
    double gbps = rates[rates.size() / 2];
    std::printf("adamw %10zu elements  %8.3f GB/s  %7.3f ns/element\n", n, gbps, kStateBytesPerElement / gbps);
  }
  return 0;
}
