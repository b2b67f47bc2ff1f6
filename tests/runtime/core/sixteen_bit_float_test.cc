// fp16 and bf16 conversions against known bit patterns, exhaustive round trips, exhaustive ties,
// and the F16C path against the portable one (docs/numerics.md, "16-bit storage").
#include "runtime/core/sixteen_bit_float.h"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "tests/support/skip.h"

namespace dslaunch::runtime {
namespace {

float F(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t Bits(float value) { return std::bit_cast<uint32_t>(value); }
uint16_t H(float value) { return FloatToHalf(value).bits; }
uint16_t B(float value) { return FloatToBFloat16(value).bits; }

bool IsHalfNaN(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0; }

// The exact value of an fp16 bit pattern, computed independently of the code under test.
double HalfValue(uint16_t h) {
  const int exponent = (h >> 10) & 0x1F;
  const int mantissa = h & 0x3FF;
  if (exponent == 0x1F) return (h & 0x8000) ? -HUGE_VAL : HUGE_VAL;  // only called for non-NaN
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, -24)
                                         : std::ldexp(1024 + mantissa, exponent - 25);
  return (h & 0x8000) ? -magnitude : magnitude;
}

TEST_CASE("FloatToHalf gives the known bit patterns") {
  CHECK(H(0.0f) == 0x0000);
  CHECK(H(-0.0f) == 0x8000);
  CHECK(H(1.0f) == 0x3C00);
  CHECK(H(-2.0f) == 0xC000);
  CHECK(H(0.5f) == 0x3800);
  CHECK(H(0.1f) == 0x2E66);
  CHECK(H(1.0f / 3.0f) == 0x3555);
  CHECK(H(65504.0f) == 0x7BFF);                      // largest finite
  CHECK(H(65519.996f) == 0x7BFF);                    // just below the halfway point
  CHECK(H(65520.0f) == 0x7C00);                      // halfway, 0x7BFF is odd: ties to inf
  CHECK(H(1e6f) == 0x7C00);                          // overflow to inf
  CHECK(H(-1e6f) == 0xFC00);
  CHECK(H(std::numeric_limits<float>::infinity()) == 0x7C00);
  CHECK(H(-std::numeric_limits<float>::infinity()) == 0xFC00);
  CHECK(H(std::ldexp(1.0f, -14)) == 0x0400);         // smallest normal
  CHECK(H(std::ldexp(1.0f, -24)) == 0x0001);         // smallest subnormal
  CHECK(H(std::ldexp(1023.0f, -24)) == 0x03FF);      // largest subnormal
  CHECK(H(std::ldexp(1.0f, -25)) == 0x0000);         // half the smallest subnormal: tie to 0 (even)
  CHECK(H(std::nextafter(std::ldexp(1.0f, -25), 1.0f)) == 0x0001);  // just above: rounds up
  CHECK(H(std::ldexp(3.0f, -25)) == 0x0002);         // 1.5 steps: tie to 2 (even)
  CHECK(H(-std::ldexp(1.0f, -26)) == 0x8000);        // underflow keeps the sign
  CHECK(H(F(0x00000001)) == 0x0000);                 // fp32 subnormal
  CHECK(H(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);  // tie between 0x3C00 and 0x3C01: even
  CHECK(H(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);  // tie between 0x3C01 and 0x3C02: even
  CHECK(H(std::ldexp(2047.0f, -25)) == 0x0400);      // rounds up out of the subnormals
}

TEST_CASE("FloatToHalf keeps NaN a quiet NaN") {
  CHECK(H(std::numeric_limits<float>::quiet_NaN()) == 0x7E00);
  CHECK(H(F(0x7F800001)) == 0x7E00);  // signalling, payload below fp16's reach: quieted
  CHECK(H(F(0xFFC00000)) == 0xFE00);  // sign kept
  CHECK(H(F(0x7FA00000)) == 0x7F00);  // top payload bit kept, quiet bit forced
}

TEST_CASE("HalfToFloat gives the known values") {
  CHECK(HalfToFloat(Half{0x3C00}) == 1.0f);
  CHECK(HalfToFloat(Half{0x7BFF}) == 65504.0f);
  CHECK(HalfToFloat(Half{0x0001}) == std::ldexp(1.0f, -24));
  CHECK(HalfToFloat(Half{0x8001}) == -std::ldexp(1.0f, -24));
  CHECK(HalfToFloat(Half{0x0400}) == std::ldexp(1.0f, -14));
  CHECK(Bits(HalfToFloat(Half{0x8000})) == 0x80000000u);
  CHECK(HalfToFloat(Half{0x7C00}) == std::numeric_limits<float>::infinity());
  CHECK(HalfToFloat(Half{0xFC00}) == -std::numeric_limits<float>::infinity());
  CHECK(Bits(HalfToFloat(Half{0x7C01})) == 0x7FC02000u);  // signalling NaN comes back quiet
  CHECK(Bits(HalfToFloat(Half{0x7E00})) == 0x7FC00000u);
}

TEST_CASE("Every fp16 bit pattern converts exactly to fp32 and back") {
  for (uint32_t i = 0; i <= 0xFFFF; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = HalfToFloat(Half{h});
    if (IsHalfNaN(h)) {
      REQUIRE(std::isnan(f));
      REQUIRE(H(f) == (h | 0x0200));  // the payload survives, the quiet bit is set
      continue;
    }
    CAPTURE(h);
    REQUIRE(static_cast<double>(f) == HalfValue(h));
    REQUIRE(H(f) == h);
  }
}

// For every pair of neighbouring positive fp16 values: the midpoint rounds to the even one, and
// the floats just either side of it round to the nearer one. Covers subnormals, normals, and the
// overflow boundary (the neighbour of 0x7BFF is 65536, the next value if the exponent went on).
TEST_CASE("FloatToHalf rounds to nearest, ties to even, at every fp16 boundary") {
  for (uint16_t lo = 0; lo < 0x7C00; ++lo) {
    const uint16_t hi = static_cast<uint16_t>(lo + 1);
    const double hi_value = hi == 0x7C00 ? 65536.0 : HalfValue(hi);
    const float mid = static_cast<float>((HalfValue(lo) + hi_value) / 2);  // exact in fp32
    CAPTURE(lo);
    REQUIRE(static_cast<double>(mid) == (HalfValue(lo) + hi_value) / 2);
    const uint16_t even = (lo & 1) == 0 ? lo : hi;
    REQUIRE(H(mid) == even);
    REQUIRE(H(-mid) == (even | 0x8000));
    REQUIRE(H(std::nextafter(mid, 0.0f)) == lo);
    REQUIRE(H(std::nextafter(mid, 1e9f)) == hi);
  }
}

TEST_CASE("FloatToBFloat16 gives the known bit patterns") {
  CHECK(B(1.0f) == 0x3F80);
  CHECK(B(-1.0f) == 0xBF80);
  CHECK(B(3.0f) == 0x4040);
  CHECK(B(0.0f) == 0x0000);
  CHECK(B(-0.0f) == 0x8000);
  CHECK(B(F(0x3F808000)) == 0x3F80);  // tie between 0x3F80 and 0x3F81: even
  CHECK(B(F(0x3F818000)) == 0x3F82);  // tie between 0x3F81 and 0x3F82: even
  CHECK(B(F(0x3F808001)) == 0x3F81);  // just past the tie
  CHECK(B(F(0x3F807FFF)) == 0x3F80);  // just before the tie
  CHECK(B(F(0x7F7F7FFF)) == 0x7F7F);  // largest finite bf16
  CHECK(B(F(0x7F7F8000)) == 0x7F80);  // tie, 0x7F7F odd: overflows to inf
  CHECK(B(std::numeric_limits<float>::max()) == 0x7F80);
  CHECK(B(-std::numeric_limits<float>::infinity()) == 0xFF80);
  CHECK(B(F(0x00018000)) == 0x0002);  // subnormals round like everything else
  CHECK(B(F(0x00008000)) == 0x0000);
  CHECK(B(std::numeric_limits<float>::quiet_NaN()) == 0x7FC0);
  CHECK(B(F(0x7F800001)) == 0x7FC0);  // signalling NaN whose payload is in the low bits: stays NaN
  CHECK(B(F(0xFFA00000)) == 0xFFE0);
  CHECK(Bits(BFloat16ToFloat(BFloat16{0x3F80})) == 0x3F800000u);
  CHECK(Bits(BFloat16ToFloat(BFloat16{0x7F81})) == 0x7FC10000u);  // quieted
}

TEST_CASE("Every bf16 bit pattern converts exactly to fp32 and back") {
  for (uint32_t i = 0; i <= 0xFFFF; ++i) {
    const uint16_t b = static_cast<uint16_t>(i);
    const float f = BFloat16ToFloat(BFloat16{b});
    CAPTURE(b);
    if ((b & 0x7F80) == 0x7F80 && (b & 0x7F) != 0) {
      REQUIRE(std::isnan(f));
      REQUIRE(B(f) == (b | 0x0040));
      continue;
    }
    REQUIRE(Bits(f) == static_cast<uint32_t>(b) << 16);
    REQUIRE(B(f) == b);
  }
}

// Inputs that exercise every region: a stride through all 2^32 patterns, plus the neighbourhood
// of every fp16 rounding boundary.
std::vector<float> SweepInputs() {
  std::vector<float> inputs;
  // 65521 is prime, so the stride visits every exponent and many mantissas (~65k values).
  for (uint64_t x = 0; x <= 0xFFFFFFFFull; x += 65521) inputs.push_back(F(static_cast<uint32_t>(x)));
  for (uint16_t h = 0; h < 0x7C00; ++h) {
    const uint32_t base = Bits(HalfToFloat(Half{h}));
    for (uint32_t d = 0x0FFE; d <= 0x1002; ++d) {  // around the midpoint to the next fp16
      inputs.push_back(F(base + d));
      inputs.push_back(F((base + d) | 0x80000000u));
    }
  }
  return inputs;
}

// Every fp16 pattern, as the inputs of the widening conversions.
std::vector<Half> AllHalves() {
  std::vector<Half> all(0x10000);
  for (uint32_t i = 0; i <= 0xFFFF; ++i) all[i].bits = static_cast<uint16_t>(i);
  return all;
}

TEST_CASE("Span conversions equal the scalar ones") {
  const std::vector<float> inputs = SweepInputs();
  std::vector<Half> portable(inputs.size());
  FloatToHalfPortable(inputs, portable);
  for (size_t i = 0; i < inputs.size(); ++i) REQUIRE(portable[i] == FloatToHalf(inputs[i]));

  const std::vector<Half> all = AllHalves();
  std::vector<float> widened(all.size());
  HalfToFloatPortable(all, widened);
  for (size_t i = 0; i < all.size(); ++i) REQUIRE(Bits(widened[i]) == Bits(HalfToFloat(all[i])));

  std::vector<Half> dispatched(inputs.size());
  FloatToHalf(inputs, dispatched);
  CHECK(dispatched == portable);
}

TEST_CASE("The F16C path equals the portable one bit for bit") {
  DSLAUNCH_SKIP_UNLESS(HasF16c(), "f16c", "this CPU has no F16C instructions");
  const std::vector<float> inputs = SweepInputs();
  std::vector<Half> portable(inputs.size()), f16c(inputs.size());
  FloatToHalfPortable(inputs, portable);
  FloatToHalfF16c(inputs, f16c);
  for (size_t i = 0; i < inputs.size(); ++i) {
    CAPTURE(Bits(inputs[i]));
    REQUIRE(f16c[i].bits == portable[i].bits);
  }
  const std::vector<Half> all = AllHalves();
  std::vector<float> widened(all.size()), widened_f16c(all.size());
  HalfToFloatPortable(all, widened);
  HalfToFloatF16c(all, widened_f16c);
  for (size_t i = 0; i < all.size(); ++i) {
    CAPTURE(i);
    REQUIRE(Bits(widened_f16c[i]) == Bits(widened[i]));
  }
}

TEST_CASE("bf16 span conversions equal the scalar ones") {
  const std::vector<float> inputs = SweepInputs();
  std::vector<BFloat16> narrow(inputs.size());
  FloatToBFloat16(inputs, narrow);
  std::vector<float> wide(inputs.size());
  BFloat16ToFloat(narrow, wide);
  for (size_t i = 0; i < inputs.size(); ++i) {
    REQUIRE(narrow[i] == FloatToBFloat16(inputs[i]));
    REQUIRE(Bits(wide[i]) == Bits(BFloat16ToFloat(narrow[i])));
  }
}

TEST_CASE("HasInfOrNaN finds a single inf or NaN anywhere") {
  CHECK_FALSE(HasInfOrNaN(std::span<const float>{}));
  std::vector<float> values(10000, 1.5f);
  values[17] = std::numeric_limits<float>::max();
  values[18] = -0.0f;
  values[19] = F(0x00000001);
  CHECK_FALSE(HasInfOrNaN(values));
  for (size_t pos : {size_t{0}, size_t{4095}, size_t{4096}, size_t{9999}}) {
    for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN(), F(0xFF800001)}) {
      CAPTURE(pos);
      std::vector<float> v = values;
      v[pos] = bad;
      CHECK(HasInfOrNaN(v));
    }
  }
  std::vector<Half> halves(100, Half{0x7BFF});
  CHECK_FALSE(HasInfOrNaN(halves));
  halves[50] = Half{0xFC00};
  CHECK(HasInfOrNaN(halves));
  std::vector<BFloat16> bf(100, BFloat16{0x7F7F});
  CHECK_FALSE(HasInfOrNaN(bf));
  bf[99] = BFloat16{0x7FC0};
  CHECK(HasInfOrNaN(bf));
}

}  // namespace
}  // namespace dslaunch::runtime
