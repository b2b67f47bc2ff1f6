// LinearForward / LinearBackward of runtime/ops/cuda/ops.h against runtime/ops/cpu/'s.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/ops/cpu/ops.h"
#include "runtime/ops/cuda/ops.h"
#include "tests/runtime/ops/cuda/ops_test_support.h"

namespace dslaunch::runtime::ops::cuda::testing {
namespace {

// fp32: cuBLASLt (no TF32) and OpenBLAS sum the k products in different orders; the difference is
// ~sqrt(k) * 2^-24 times the terms' size, under 1e-5 of the RMS for k <= 200. A wrong layout or a
// lost accumulation is O(1).
constexpr Tolerance kF32Tolerance{1e-4, 1e-4};
// bf16: the same rounded inputs and fp32 accumulation on both sides; the GPU rounds each result once
// to bf16 (at most 2^-8 = 0.4% relative).
constexpr Tolerance kBF16Tolerance{1e-2, 1e-2};
// fp16: as bf16 with 2^-11 relative per rounding.
constexpr Tolerance kF16Tolerance{2e-3, 2e-3};

template <typename T>
void CheckLinear(int n, int in_dim, int out_dim, bool with_bias, uint64_t seed) {
  const DType dt = kDTypeOf<T>;
  const Tolerance tol = ToleranceFor<T>(kF32Tolerance, kBF16Tolerance, kF16Tolerance);
  const std::string shape = "n=" + std::to_string(n) + " in=" + std::to_string(in_dim) +
                            " out=" + std::to_string(out_dim) + (with_bias ? " bias" : " no bias");
  INFO(shape);
  uint64_t s = seed;
  const size_t nx = static_cast<size_t>(n) * in_dim, nw = static_cast<size_t>(out_dim) * in_dim,
               ny = static_cast<size_t>(n) * out_dim;
  const std::vector<float> x = Random(nx, s, 1.0f, dt), w = Random(nw, s, 1.0f, dt), b = Random(out_dim, s, 1.0f, dt);
  const std::vector<float> dy = Random(ny, s, 1.0f, dt);
  // Gradients start non-zero: the backward must add to them.
  const std::vector<float> din0 = Random(nx, s, 1.0f, dt), dw0 = Random(nw, s, 1.0f, dt),
                           db0 = Random(out_dim, s, 1.0f, dt);

  std::vector<float> y(ny), din = din0, dw = dw0, db = db0;
  ops::LinearForward(y.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, n, in_dim, out_dim);
  ops::LinearBackward(din.data(), dw.data(), with_bias ? db.data() : nullptr, dy.data(), x.data(), w.data(), n, in_dim,
                      out_dim);

  CublasLtContext ctx = MakeContext();
  TestStream stream;
  DeviceBuffer d_x(dt, x), d_w(dt, w), d_b(dt, b), d_dy(dt, dy), d_y(dt, NaNs(ny));
  DeviceBuffer d_din(dt, din0), d_dw(dt, dw0), d_db(dt, db0);
  DSLAUNCH_REQUIRE_OK(LinearForward<T>(ctx, d_y.as<T>(), d_x.as<T>(), d_w.as<T>(), with_bias ? d_b.as<T>() : nullptr,
                                       n, in_dim, out_dim, stream.get()));
  DSLAUNCH_REQUIRE_OK(LinearBackward<T>(ctx, d_din.as<T>(), d_dw.as<T>(), with_bias ? d_db.as<T>() : nullptr,
                                        d_dy.as<T>(), d_x.as<T>(), d_w.as<T>(), n, in_dim, out_dim, stream.get()));
  stream.Finish();
  ExpectClose(d_y.Download(), y, tol, "out");
  ExpectClose(d_din.Download(), din, tol, "din");
  ExpectClose(d_dw.Download(), dw, tol, "dweight");
  // Without a bias the launcher was given no dbias: the buffer keeps its start.
  ExpectClose(d_db.Download(), db, tol, "dbias");
}

template <typename T>
void LinearMatchesCpu() {
  // Shapes in multiples of 8 (the aligned fast kernels), odd ones (unaligned rows, partial tiles),
  // and one row.
  CheckLinear<T>(64, 128, 96, true, 1);
  CheckLinear<T>(37, 45, 29, true, 2);
  CheckLinear<T>(37, 45, 29, false, 3);
  CheckLinear<T>(1, 200, 130, true, 4);
}

DSLAUNCH_OPS_CASES("LinearForward and LinearBackward match the CPU op and accumulate", LinearMatchesCpu)

template <typename T>
void LinearSkipsNullGradients() {
  const DType dt = kDTypeOf<T>;
  const int n = 5, in_dim = 6, out_dim = 7;
  uint64_t s = 11;
  const std::vector<float> x = Random(n * in_dim, s, 1.0f, dt), w = Random(out_dim * in_dim, s, 1.0f, dt),
                           dy = Random(n * out_dim, s, 1.0f, dt), dw0 = Random(out_dim * in_dim, s, 1.0f, dt);
  std::vector<float> dw = dw0;
  ops::LinearBackward(nullptr, dw.data(), nullptr, dy.data(), x.data(), w.data(), n, in_dim, out_dim);
  CublasLtContext ctx = MakeContext();
  TestStream stream;
  DeviceBuffer d_x(dt, x), d_w(dt, w), d_dy(dt, dy), d_dw(dt, dw0);
  DSLAUNCH_REQUIRE_OK(LinearBackward<T>(ctx, nullptr, d_dw.as<T>(), nullptr, d_dy.as<T>(), d_x.as<T>(), d_w.as<T>(), n,
                                        in_dim, out_dim, stream.get()));
  stream.Finish();
  ExpectClose(d_dw.Download(), dw, ToleranceFor<T>(kF32Tolerance, kBF16Tolerance, kF16Tolerance), "dweight");
}

DSLAUNCH_OPS_CASES("LinearBackward computes only the gradients it is given", LinearSkipsNullGradients)

}  // namespace
}  // namespace dslaunch::runtime::ops::cuda::testing
