// dslaunch-gemm-bench: the sgemm FLOP/s of this machine on the matrix products of a GPT training
// step, the denominator of model-FLOPs utilisation (MFU) in scripts/bench-train.sh.
//
//   dslaunch-gemm-bench [--rows N] [--embd C] [--seconds S]
//
// For N token rows and width C (defaults: gpt-bench.json, 8 x 256 rows, C = 512) it times every
// product that runtime/ops/cpu/ops.h's LinearForward/LinearBackward make for the qkv, attention output,
// MLP and MLP output projections, in the transposition each uses, plus a square 2048 product for
// reference. Each shape is warmed up, repeated for at least S seconds (default 1), and its result
// spot-checked against a dot product in double. Threads: whatever OpenBLAS is configured with
// (OPENBLAS_NUM_THREADS); the benchmark states it. Prints one line per shape and a last line
//   sgemm GFLOP/s (model mix): X
// the FLOP-weighted rate over the model's shapes (total FLOPs / total time, each shape weighted
// by how often a step runs it), which the training benchmark uses as the machine's sgemm rate.
#include <cblas.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "runtime/ops/cpu/sgemm_probe.h"

namespace {

using namespace dslaunch::runtime;

// Repetitions before timing: the first calls fault in pages and size OpenBLAS's buffers.
constexpr int kWarmupCalls = 2;
// A spot-checked element may differ from the double-precision dot product by this much relative
// to the sum of |a_i b_i| (fp32 accumulation over K <= 4096 terms).
constexpr double kCheckTolerance = 1e-4;

using ops::LinearProduct;
using ops::ProductShape;

// A product of the step, named for the table, and how often a training step runs it.
struct Shape {
  std::string name;
  ProductShape dims;
  int per_step;  // times a training step runs it (layers x 1)
};

struct Timing {
  double seconds_per_call;
  bool ok;
};

// Runs the product as runtime/ops/cpu/ops.h does, returns seconds per call, and checks a few elements.
Timing TimeShape(const Shape& shape, double min_seconds, std::mt19937& rng) {
  const ProductShape& s = shape.dims;
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto fill = [&](std::vector<float>& v) {
    for (auto& x : v) x = u(rng);
  };
  // Operands named as in LinearForward/Backward: x [n][in], w [out][in], y/dy [n][out].
  std::vector<float> x(static_cast<size_t>(s.n) * s.in), w(static_cast<size_t>(s.out) * s.in),
      y(static_cast<size_t>(s.n) * s.out);
  fill(x), fill(w), fill(y);
  const int m = s.m(), nn = s.cols(), k = s.k();
  std::vector<float> c(static_cast<size_t>(m) * nn, 0.0f);  // the product's output
  auto call = [&] { ops::RunProduct(s, x.data(), w.data(), y.data(), c.data()); };
  for (int i = 0; i < kWarmupCalls; ++i) call();
  using Clock = std::chrono::steady_clock;
  long calls = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  do {
    call();
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < min_seconds);

  // Element (i, j) of the product, in double.
  auto reference = [&](int i, int j, double* magnitude) {
    double sum = 0, mag = 0;
    for (int t = 0; t < k; ++t) {
      double a = 0, b = 0;
      switch (s.product) {
        case LinearProduct::kForward: a = x[static_cast<size_t>(i) * s.in + t], b = w[static_cast<size_t>(j) * s.in + t]; break;
        case LinearProduct::kInputGrad: a = y[static_cast<size_t>(i) * s.out + t], b = w[static_cast<size_t>(t) * s.in + j]; break;
        case LinearProduct::kWeightGrad: a = y[static_cast<size_t>(t) * s.out + i], b = x[static_cast<size_t>(t) * s.in + j]; break;
      }
      sum += a * b;
      mag += std::abs(a * b);
    }
    *magnitude = mag;
    return sum;
  };
  bool ok = true;
  std::uniform_int_distribution<int> ri(0, m - 1), rj(0, nn - 1);
  for (int probe = 0; probe < 16; ++probe) {
    const int i = ri(rng), j = rj(rng);
    double mag = 0;
    const double want = reference(i, j, &mag);
    if (std::abs(c[static_cast<size_t>(i) * nn + j] - want) > kCheckTolerance * mag) ok = false;
  }
  return Timing{elapsed / static_cast<double>(calls), ok};
}

}  // namespace

int main(int argc, char** argv) {
  int rows = 8 * 256, embd = 512;
  double seconds = 1.0;
  CLI::App app{"dslaunch-gemm-bench: sgemm FLOP/s on the GPT training step's shapes", "dslaunch-gemm-bench"};
  app.add_option("--rows", rows, "token rows per micro-batch (batch x sequence)")->check(CLI::PositiveNumber);
  app.add_option("--embd", embd, "model width n_embd")->check(CLI::PositiveNumber);
  app.add_option("--seconds", seconds, "minimum timed seconds per shape")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  const int c = embd, n = rows;
  // A block's four linear layers (the language-model head, V x C with V = 256 here, is small), as
  // the runtime's start-up probe times them (runtime/ops/cpu/sgemm_choice.h).
  const char* const kNames[] = {"qkv      fwd  y = x W^T", "qkv      dx   dy W", "qkv      dW   dy^T x",
                                "attn out fwd", "attn out dx", "attn out dW",
                                "mlp fc   fwd", "mlp fc   dx", "mlp fc   dW",
                                "mlp proj fwd", "mlp proj dx", "mlp proj dW"};
  std::vector<Shape> model;
  for (const ProductShape& dims : ops::GptBlockProducts(n, c)) model.push_back({kNames[model.size()], dims, 1});
  std::printf("sgemm on %s; %d thread(s); rows %d, n_embd %d\n", openblas_get_config(),
              openblas_get_num_threads(), n, c);
  std::printf("%-26s %6s %6s %6s %10s %10s\n", "product", "M", "N", "K", "ms", "GFLOP/s");
  std::mt19937 rng(2026);
  bool all_ok = true;
  double flops_total = 0, seconds_total = 0;
  auto report = [&](const Shape& s) {
    const Timing t = TimeShape(s, seconds, rng);
    const double flops = s.dims.flops();
    std::printf("%-26s %6d %6d %6d %10.3f %10.1f%s\n", s.name.c_str(), s.dims.m(), s.dims.cols(), s.dims.k(), 1e3 * t.seconds_per_call,
                flops / t.seconds_per_call / 1e9, t.ok ? "" : "  WRONG RESULT");
    all_ok = all_ok && t.ok;
    return std::pair{flops, t.seconds_per_call};
  };
  for (const Shape& s : model) {
    auto [flops, secs] = report(s);
    flops_total += s.per_step * flops;
    seconds_total += s.per_step * secs;
  }
  constexpr int kSquare = 2048;
  report(Shape{"square (reference)", {LinearProduct::kForward, kSquare, kSquare, kSquare}, 0});
  std::printf("sgemm GFLOP/s (model mix): %.1f\n", flops_total / seconds_total / 1e9);
  if (!all_ok) {
    std::fprintf(stderr, "dslaunch-gemm-bench: a product differs from its reference\n");
    return 1;
  }
  return 0;
}
