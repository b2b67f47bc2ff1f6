// FloatTo16 / Float16To32 of runtime/ops/cuda/ops.h bit for bit against
// runtime/core/sixteen_bit_float.h (NaN payloads aside: the hardware writes its canonical NaN).
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/core/sixteen_bit_float.h"
#include "runtime/ops/cuda/ops.h"
#include "tests/runtime/ops/cuda/ops_test_support.h"

namespace dslaunch::runtime::ops::cuda::testing {
namespace {

// fp32 patterns looked at: a stride through all 2^32 (an odd stride visits every residue, so the
// low bits that decide rounding vary), plus the landmarks of docs/numerics.md.
constexpr uint32_t kPatternStride = 4099;
constexpr size_t kStridedPatterns = size_t{1} << 20;

std::vector<float> Patterns() {
  std::vector<float> v;
  v.reserve(kStridedPatterns + 64);
  uint32_t bits = 0;
  for (size_t i = 0; i < kStridedPatterns; ++i, bits += kPatternStride) v.push_back(std::bit_cast<float>(bits));
  const float landmarks[] = {0.0f,         -0.0f,      1.0f,        65504.0f,       65519.0f,     65520.0f,
                             -65520.0f,    65536.0f,   0x1p-24f,    0x1p-25f,       0x3p-25f,     0x1p-14f,
                             0x1.ffcp-15f, 1.00048828125f /* fp16 tie */, 1.0f + 0x1p-8f /* bf16 tie */,
                             1.0f + 0x3p-8f, INFINITY, -INFINITY,   3.4028235e38f,  0x1p-126f,    0x1p-149f,
                             -0x1p-149f,   1e-40f};
  for (float f : landmarks) v.push_back(f);
  v.push_back(std::bit_cast<float>(0x7F7F8000u));  // rounds up to bf16 infinity
  v.push_back(std::bit_cast<float>(0x7F7F7FFFu));  // just below: the largest bf16
  return v;
}

void CheckFloatTo16(DType dtype) {
  const std::vector<float> in = Patterns();
  TestStream stream;
  DeviceBuffer d_in(DType::kFloat32, in), d_out(dtype, in.size());
  DSLAUNCH_REQUIRE_OK(FloatTo16(d_out.get(), dtype, d_in.as<float>(), static_cast<long>(in.size()), stream.get()));
  stream.Finish();
  const std::vector<uint16_t> got = d_out.DownloadBits16();
  size_t mismatches = 0, first = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const uint16_t want = dtype == DType::kBFloat16 ? FloatToBFloat16(in[i]).bits : FloatToHalf(in[i]).bits;
    bool same = got[i] == want;
    if (std::isnan(in[i])) {
      // Both NaN (exponent all ones, mantissa non-zero), payloads may differ.
      const uint16_t exp = dtype == DType::kBFloat16 ? 0x7F80 : 0x7C00, mant = dtype == DType::kBFloat16 ? 0x007F : 0x03FF;
      same = (got[i] & exp) == exp && (got[i] & mant) != 0;
    }
    if (!same && mismatches++ == 0) first = i;
  }
  CAPTURE(first);
  CAPTURE(in[first]);
  CHECK_MESSAGE(mismatches == 0, mismatches << " of " << in.size() << " conversions differ from the CPU's");
}

void CheckFloat16To32(DType dtype) {
  std::vector<uint16_t> all(1u << 16);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  TestStream stream;
  DeviceBuffer d_in(dtype, all.size()), d_out(DType::kFloat32, all.size());
  DSLAUNCH_REQUIRE_CUDA(cudaMemcpy(d_in.get(), all.data(), all.size() * 2, cudaMemcpyHostToDevice));
  DSLAUNCH_REQUIRE_OK(Float16To32(d_out.as<float>(), d_in.get(), dtype, static_cast<long>(all.size()), stream.get()));
  stream.Finish();
  const std::vector<float> got = d_out.Download();
  size_t mismatches = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const float want = dtype == DType::kBFloat16 ? BFloat16ToFloat(BFloat16{all[i]}) : HalfToFloat(Half{all[i]});
    const bool same = std::isnan(want) ? std::isnan(got[i])
                                       : std::bit_cast<uint32_t>(want) == std::bit_cast<uint32_t>(got[i]);
    if (!same) ++mismatches;
  }
  CHECK_MESSAGE(mismatches == 0, mismatches << " of 65536 patterns differ from the CPU's");
}

TEST_CASE("FloatTo16 rounds to bf16 as the CPU does") {
  DSLAUNCH_REQUIRE_GPU();
  CheckFloatTo16(DType::kBFloat16);
}

TEST_CASE("FloatTo16 rounds to fp16 as the CPU does") {
  DSLAUNCH_REQUIRE_GPU();
  CheckFloatTo16(DType::kFloat16);
}

TEST_CASE("Float16To32 widens every bf16 pattern exactly") {
  DSLAUNCH_REQUIRE_GPU();
  CheckFloat16To32(DType::kBFloat16);
}

TEST_CASE("Float16To32 widens every fp16 pattern exactly") {
  DSLAUNCH_REQUIRE_GPU();
  CheckFloat16To32(DType::kFloat16);
}

TEST_CASE("FloatTo16 rejects fp32 as the output type") {
  DSLAUNCH_REQUIRE_GPU();
  float dummy = 0.0f;
  CHECK(FloatTo16(&dummy, DType::kFloat32, &dummy, 1, nullptr).code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dslaunch::runtime::ops::cuda::testing
