// LayerNormForward / LayerNormBackward of runtime/ops/cuda/ops.h against runtime/ops/cpu/'s.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/ops/cpu/ops.h"
#include "runtime/ops/cuda/ops.h"
#include "tests/runtime/ops/cuda/ops_test_support.h"

namespace dslaunch::runtime::ops::cuda::testing {
namespace {

// fp32: the row sums are a warp tree on the GPU and a sequential (vectorized) loop on the CPU; the
// difference is a few ulps of mean, rstd and the outputs. A missing term or a wrong rstd is O(1).
constexpr Tolerance kF32Tolerance{1e-5, 1e-5};
// The saved mean and rstd are fp32 from the same (rounded) inputs whatever T is.
constexpr Tolerance kStatsTolerance{1e-5, 1e-5};
// bf16 / fp16: the same inputs; the GPU rounds each output once (at most 2^-8 / 2^-11 relative:
// 2.5x / 4x inside the tolerance), and the accumulating gradients once after the addition.
constexpr Tolerance kBF16Tolerance{1e-2, 1e-2};
constexpr Tolerance kF16Tolerance{2e-3, 2e-3};

template <typename T>
void CheckLayerNorm(int n, int c, uint64_t seed) {
  const DType dt = kDTypeOf<T>;
  const Tolerance tol = ToleranceFor<T>(kF32Tolerance, kBF16Tolerance, kF16Tolerance);
  INFO("n=" << n << " c=" << c);
  uint64_t s = seed;
  const size_t nx = static_cast<size_t>(n) * c;
  // Rows with a non-zero mean (x + 0.5) so that the mean subtraction matters.
  std::vector<float> x = Random(nx, s, 2.0f);
  for (float& v : x) v = RoundTo(dt, v + 0.5f);
  std::vector<float> w = Random(c, s, 0.5f), b = Random(c, s, 0.5f, dt);
  for (float& v : w) v = RoundTo(dt, v + 1.0f);
  const std::vector<float> dy = Random(nx, s, 1.0f, dt);
  const std::vector<float> din0 = Random(nx, s, 1.0f, dt), dw0 = Random(c, s, 1.0f, dt), db0 = Random(c, s, 1.0f, dt);

  std::vector<float> y(nx), mean(n), rstd(n), din = din0, dw = dw0, db = db0;
  ops::LayerNormForward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c);
  ops::LayerNormBackward(din.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(), rstd.data(), n,
                         c);

  TestStream stream;
  DeviceBuffer d_x(dt, x), d_w(dt, w), d_b(dt, b), d_dy(dt, dy), d_y(dt, NaNs(nx));
  DeviceBuffer d_mean(DType::kFloat32, NaNs(n)), d_rstd(DType::kFloat32, NaNs(n));
  // The backward gets the CPU's statistics, so that it is checked on its own.
  DeviceBuffer d_cpu_mean(DType::kFloat32, mean), d_cpu_rstd(DType::kFloat32, rstd);
  DeviceBuffer d_din(dt, din0), d_dw(dt, dw0), d_db(dt, db0);
  DSLAUNCH_REQUIRE_OK(LayerNormForward<T>(d_y.as<T>(), d_mean.as<float>(), d_rstd.as<float>(), d_x.as<T>(),
                                          d_w.as<T>(), d_b.as<T>(), n, c, stream.get()));
  DSLAUNCH_REQUIRE_OK(LayerNormBackward<T>(d_din.as<T>(), d_dw.as<T>(), d_db.as<T>(), d_dy.as<T>(), d_x.as<T>(),
                                           d_w.as<T>(), d_cpu_mean.as<float>(), d_cpu_rstd.as<float>(), n, c,
                                           stream.get()));
  stream.Finish();
  ExpectClose(d_y.Download(), y, tol, "out");
  ExpectClose(d_mean.Download(), mean, kStatsTolerance, "mean");
  ExpectClose(d_rstd.Download(), rstd, kStatsTolerance, "rstd");
  ExpectClose(d_din.Download(), din, tol, "din");
  ExpectClose(d_dw.Download(), dw, tol, "dweight");
  ExpectClose(d_db.Download(), db, tol, "dbias");
}

template <typename T>
void LayerNormMatchesCpu() {
  CheckLayerNorm<T>(33, 200, 1);  // C not a multiple of the warp
  CheckLayerNorm<T>(9, 13, 2);    // C below a warp; rows fewer than a block's
  CheckLayerNorm<T>(70, 768, 3);  // GPT-2 124M's C; rows over several blocks
}

DSLAUNCH_OPS_CASES("LayerNormForward and LayerNormBackward match the CPU op and accumulate", LayerNormMatchesCpu)

}  // namespace
}  // namespace dslaunch::runtime::ops::cuda::testing
