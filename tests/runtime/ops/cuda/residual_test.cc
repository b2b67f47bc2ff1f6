// The elementwise kernels of runtime/ops/cuda/ops.h against plain CPU loops. Each result is
// one fp32 add rounded once to the storage type (nearest even, as runtime/core/sixteen_bit_float.h
// rounds), so the device must match the loop bit for bit.
#include "runtime/ops/cuda/ops.h"

#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/core/random.h"
#include "runtime/core/sixteen_bit_float.h"
#include "tests/support/device_array.h"
#include "tests/support/gpu_device.h"

namespace dslaunch::runtime::ops::cuda {
namespace {

using dslaunch::testing::DeviceArray;

// Past the launchers' grid cap (2^16 blocks of 256 threads = 2^24 threads), so every thread's
// grid-stride loop takes a second turn; odd, so the tail is partial.
constexpr long kCount = (1L << 24) + 12345;

// Host storage of each device type, and fp32 conversions with the device's rounding.
template <typename D>
struct Host;
template <>
struct Host<float> {
  using Type = float;
  static float ToFloat(float x) { return x; }
  static float FromFloat(float x) { return x; }
};
template <>
struct Host<__nv_bfloat16> {
  using Type = BFloat16;
  static float ToFloat(BFloat16 x) { return BFloat16ToFloat(x); }
  static BFloat16 FromFloat(float x) { return FloatToBFloat16(x); }
};
template <>
struct Host<__half> {
  using Type = Half;
  static float ToFloat(Half x) { return HalfToFloat(x); }
  static Half FromFloat(float x) { return FloatToHalf(x); }
};

// Values in [-scale, scale), stored in H (rounded).
template <typename H, typename FromFloatFn>
std::vector<H> RandomValues(long count, float scale, uint64_t seed, FromFloatFn from_float) {
  std::vector<H> out(count);
  uint64_t state = seed;
  for (auto& x : out) x = from_float((2.0f * UniformFloat(state) - 1.0f) * scale);
  return out;
}

template <typename H>
bool SameBits(const std::vector<H>& a, const std::vector<H>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(H)) == 0;
}

template <typename D>
void CheckResidualAdd() {
  using H = typename Host<D>::Type;
  const std::vector<H> acc = RandomValues<H>(kCount, 4.0f, 1, Host<D>::FromFloat);
  const std::vector<H> x = RandomValues<H>(kCount, 3.0f, 2, Host<D>::FromFloat);
  std::vector<H> expected(kCount);
  for (long i = 0; i < kCount; ++i) expected[i] = Host<D>::FromFloat(Host<D>::ToFloat(acc[i]) + Host<D>::ToFloat(x[i]));
  DeviceArray<D> d_acc(kCount), d_x(kCount);
  d_acc.Put(acc);
  d_x.Put(x);
  const Status s = ResidualAdd(d_acc.data(), d_x.data(), kCount, nullptr);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(SameBits(d_acc.template Get<H>(), expected));
}

template <typename D>
void CheckAddFloat() {
  using H = typename Host<D>::Type;
  const std::vector<H> acc = RandomValues<H>(kCount, 4.0f, 3, Host<D>::FromFloat);
  const std::vector<float> x = RandomValues<float>(kCount, 1e-2f, 4, [](float v) { return v; });
  std::vector<H> expected(kCount);
  for (long i = 0; i < kCount; ++i) expected[i] = Host<D>::FromFloat(Host<D>::ToFloat(acc[i]) + x[i]);
  DeviceArray<D> d_acc(kCount);
  DeviceArray<float> d_x(kCount);
  d_acc.Put(acc);
  d_x.Put(x);
  const Status s = AddFloat(d_acc.data(), d_x.data(), kCount, nullptr);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(SameBits(d_acc.template Get<H>(), expected));
}

TEST_CASE("ResidualAdd matches a CPU loop bit for bit in fp32, bf16 and fp16") {
  DSLAUNCH_REQUIRE_GPU();
  SUBCASE("fp32") { CheckResidualAdd<float>(); }
  SUBCASE("bf16") { CheckResidualAdd<__nv_bfloat16>(); }
  SUBCASE("fp16") { CheckResidualAdd<__half>(); }
}

TEST_CASE("AddFloat adds fp32 values into fp32, bf16 and fp16 buffers as a CPU loop does") {
  DSLAUNCH_REQUIRE_GPU();
  SUBCASE("fp32") { CheckAddFloat<float>(); }
  SUBCASE("bf16") { CheckAddFloat<__nv_bfloat16>(); }
  SUBCASE("fp16") { CheckAddFloat<__half>(); }
}

TEST_CASE("The residual kernels refuse bad arguments and launch nothing for an empty range") {
  DSLAUNCH_REQUIRE_GPU();
  DeviceArray<float> a(4);
  CHECK(ResidualAdd<float>(a.data(), a.data(), 0, nullptr).ok());
  CHECK(AddFloat<float>(nullptr, nullptr, 0, nullptr).ok());
  const Status negative = ResidualAdd<float>(a.data(), a.data(), -1, nullptr);
  CHECK(negative.code() == StatusCode::kInvalidArgument);
  CHECK(negative.message().find("ResidualAdd") != std::string::npos);
  const Status null = AddFloat<float>(a.data(), nullptr, 4, nullptr);
  CHECK(null.code() == StatusCode::kInvalidArgument);
  CHECK(null.message().find("AddFloat") != std::string::npos);
}

}  // namespace
}  // namespace dslaunch::runtime::ops::cuda
