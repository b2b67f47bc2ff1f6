// GeluForward / GeluBackward of runtime/ops/cuda/ops.h against runtime/ops/cpu/'s.
#include <cstdint>
#include <vector>

#include "runtime/ops/cpu/ops.h"
#include "runtime/ops/cuda/ops.h"
#include "tests/runtime/ops/cuda/ops_test_support.h"

namespace dslaunch::runtime::ops::cuda::testing {
namespace {

// fp32: the GPU's tanhf and the CPU's tanh via SimdExp (2 ulp of expf) differ by a few ulps, and
// 1 + tanh cancels for x << 0 (absolute error ~1e-7 there, far below 1e-5 of the RMS). A wrong
// coefficient or derivative term is off by > 1e-3.
constexpr Tolerance kF32Tolerance{1e-5, 1e-5};
// bf16 / fp16: one rounding of each output (at most 2^-8 / 2^-11 relative: 2.5x / 4x inside the
// tolerance).
constexpr Tolerance kBF16Tolerance{1e-2, 1e-2};
constexpr Tolerance kF16Tolerance{2e-3, 2e-3};

template <typename T>
void CheckGelu(long count, uint64_t seed) {
  const DType dt = kDTypeOf<T>;
  const Tolerance tol = ToleranceFor<T>(kF32Tolerance, kBF16Tolerance, kF16Tolerance);
  INFO("count=" << count);
  uint64_t s = seed;
  const size_t n = static_cast<size_t>(count);
  // [-6, 6]: both tails (GELU -> 0 and -> x) and the curved middle.
  const std::vector<float> x = Random(n, s, 6.0f, dt), dy = Random(n, s, 1.0f, dt), din0 = Random(n, s, 1.0f, dt);
  std::vector<float> y(n), din = din0;
  ops::GeluForward(y.data(), x.data(), count);
  ops::GeluBackward(din.data(), dy.data(), x.data(), count);

  TestStream stream;
  DeviceBuffer d_x(dt, x), d_dy(dt, dy), d_y(dt, NaNs(n)), d_din(dt, din0);
  DSLAUNCH_REQUIRE_OK(GeluForward<T>(d_y.as<T>(), d_x.as<T>(), count, stream.get()));
  DSLAUNCH_REQUIRE_OK(GeluBackward<T>(d_din.as<T>(), d_dy.as<T>(), d_x.as<T>(), count, stream.get()));
  stream.Finish();
  ExpectClose(d_y.Download(), y, tol, "out");
  ExpectClose(d_din.Download(), din, tol, "din");
}

template <typename T>
void GeluMatchesCpu() {
  CheckGelu<T>(1, 1);
  CheckGelu<T>(1000 + 7, 2);
}

DSLAUNCH_OPS_CASES("GeluForward and GeluBackward match the CPU op and accumulate", GeluMatchesCpu)

TEST_CASE("GeluForward covers more elements than one grid-stride pass in fp32") {
  DSLAUNCH_REQUIRE_GPU();
  // 2^16 blocks of 256 threads (device_math.cuh's cap) plus a few: the loop's second pass.
  CheckGelu<float>((1L << 24) + 5, 3);
}

TEST_CASE("GeluForward works in place in bf16") {
  DSLAUNCH_REQUIRE_GPU();
  uint64_t s = 4;
  const std::vector<float> x = Random(300, s, 4.0f, DType::kBFloat16);
  std::vector<float> y(x.size());
  ops::GeluForward(y.data(), x.data(), static_cast<long>(x.size()));
  TestStream stream;
  DeviceBuffer d(DType::kBFloat16, x);
  DSLAUNCH_REQUIRE_OK(GeluForward<__nv_bfloat16>(d.as<__nv_bfloat16>(), d.as<__nv_bfloat16>(),
                                                 static_cast<long>(x.size()), stream.get()));
  stream.Finish();
  ExpectClose(d.Download(), y, kBF16Tolerance, "out (in place)");
}

}  // namespace
}  // namespace dslaunch::runtime::ops::cuda::testing
