#include "runtime/core/sixteen_bit_float.h"

#include <algorithm>
#include <bit>
#include <cstddef>

#include "common/check.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DSLAUNCH_HALF_X86 1
#else
#define DSLAUNCH_HALF_X86 0
#endif

namespace dslaunch::runtime {
namespace {

// fp32 bit-pattern landmarks used by the conversions.
constexpr uint32_t kF32AbsMask = 0x7FFFFFFFu;
constexpr uint32_t kF32Inf = 0x7F800000u;
constexpr uint32_t kF32QuietBit = 0x00400000u;
// 0.5f: its ulp is 2^-24, the fp16 subnormal step, so adding it rounds to that step (ties to even).
constexpr uint32_t kF32Half = 0x3F000000u;
// (127 - 15) << 23: moves an exponent between the fp32 and fp16 biases.
constexpr uint32_t kExponentRebias = 0x38000000u;
// 2^-14, the smallest normal fp16, as fp32 bits: below it the result is subnormal.
constexpr uint32_t kF32HalfMinNormal = 0x38800000u;
// 65520 = 65504 + half an ulp: from here on (ties to even: 0x3FF is odd) the result is infinity.
constexpr uint32_t kF32HalfOverflow = 0x477FF000u;
// Elements between early-exit checks in HasInfOrNaN: large enough to keep the inner loop vectorized.
constexpr size_t kScanChunk = 4096;

// c ? a : b as mask arithmetic: keeps the conversion loops free of branches so GCC vectorizes them.
inline uint32_t Select(bool c, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(c);
  return (a & mask) | (b & ~mask);
}

inline uint16_t HalfBitsFromFloat(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & kF32AbsMask;
  // Normal result: rebias, then round away the low 13 mantissa bits to nearest even. A carry out
  // of the mantissa correctly bumps the exponent.
  const uint32_t rebiased = abs - kExponentRebias;
  const uint32_t normal = (rebiased + 0x0FFFu + ((rebiased >> 13) & 1u)) >> 13;
  // Subnormal result (or zero, or the smallest normal after rounding up): let the FPU round.
  const uint32_t subnormal =
      std::bit_cast<uint32_t>(std::bit_cast<float>(abs) + std::bit_cast<float>(kF32Half)) - kF32Half;
  // NaN: keep the top payload bits, force the quiet bit (what F16C does).
  const uint32_t nan = 0x7E00u | ((abs >> 13) & 0x03FFu);
  uint32_t result = Select(abs < kF32HalfMinNormal, subnormal, normal);
  result = Select(abs >= kF32HalfOverflow, kHalfInfBits, result);
  result = Select(abs > kF32Inf, nan, result);
  return static_cast<uint16_t>(sign | result);
}

inline float FloatFromHalfBits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7FFFu;
  const uint32_t normal = (em << 13) + kExponentRebias;
  // Exponent all ones: infinity or NaN; NaN comes back quiet.
  const uint32_t inf_nan = (em << 13) | kF32Inf | Select(em > kHalfInfBits, kF32QuietBit, 0u);
  // Subnormal: em * 2^-24, exactly, via 0.5 + em * 2^-24 - 0.5.
  const uint32_t subnormal =
      std::bit_cast<uint32_t>(std::bit_cast<float>(kF32Half + em) - std::bit_cast<float>(kF32Half));
  uint32_t result = Select(em < 0x0400u, subnormal, normal);
  result = Select(em >= kHalfInfBits, inf_nan, result);
  return std::bit_cast<float>(sign | result);
}

inline uint16_t BFloat16BitsFromFloat(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  // Round to nearest even on the low 16 bits; overflow carries into infinity.
  const uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
  const uint32_t nan = (x >> 16) | (kBFloat16QuietNaNBits & ~kBFloat16InfBits);
  return static_cast<uint16_t>(Select((x & kF32AbsMask) > kF32Inf, nan, rounded));
}

inline float FloatFromBFloat16Bits(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  return std::bit_cast<float>(x | Select((x & kF32AbsMask) > kF32Inf, kF32QuietBit, 0u));
}

inline uint32_t IsInfOrNaNBits(uint32_t x) { return (x & kF32Inf) == kF32Inf ? 1u : 0u; }

#if DSLAUNCH_HALF_X86
// Eight values per instruction. Compiled for F16C only here, so the rest of the project keeps its
// default target; called only after HasF16c().
__attribute__((target("avx,f16c"))) void FloatToHalfF16cImpl(const float* in, Half* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(in + i);
    const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i].bits = HalfBitsFromFloat(in[i]);
}

__attribute__((target("avx,f16c"))) void HalfToFloatF16cImpl(const Half* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = FloatFromHalfBits(in[i].bits);
}
#endif

}  // namespace

Half FloatToHalf(float value) { return Half{HalfBitsFromFloat(value)}; }
float HalfToFloat(Half value) { return FloatFromHalfBits(value.bits); }
BFloat16 FloatToBFloat16(float value) { return BFloat16{BFloat16BitsFromFloat(value)}; }
float BFloat16ToFloat(BFloat16 value) { return FloatFromBFloat16Bits(value.bits); }

bool HasF16c() {
#if DSLAUNCH_HALF_X86
  // A fact about the CPU, computed once; immutable afterwards.
  static const bool has = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return has;
#else
  return false;
#endif
}

void FloatToHalfPortable(std::span<const float> in, std::span<Half> out) {
  DSLAUNCH_CHECK(in.size() == out.size()) << in.size() << " vs " << out.size();
  const size_t n = in.size();
  for (size_t i = 0; i < n; ++i) out[i].bits = HalfBitsFromFloat(in[i]);
}

void HalfToFloatPortable(std::span<const Half> in, std::span<float> out) {
  DSLAUNCH_CHECK(in.size() == out.size()) << in.size() << " vs " << out.size();
  const size_t n = in.size();
  for (size_t i = 0; i < n; ++i) out[i] = FloatFromHalfBits(in[i].bits);
}

void FloatToHalfF16c(std::span<const float> in, std::span<Half> out) {
  DSLAUNCH_CHECK(in.size() == out.size()) << in.size() << " vs " << out.size();
  DSLAUNCH_CHECK(HasF16c()) << "F16C path called on a CPU without F16C";
#if DSLAUNCH_HALF_X86
  FloatToHalfF16cImpl(in.data(), out.data(), in.size());
#endif
}

void HalfToFloatF16c(std::span<const Half> in, std::span<float> out) {
  DSLAUNCH_CHECK(in.size() == out.size()) << in.size() << " vs " << out.size();
  DSLAUNCH_CHECK(HasF16c()) << "F16C path called on a CPU without F16C";
#if DSLAUNCH_HALF_X86
  HalfToFloatF16cImpl(in.data(), out.data(), in.size());
#endif
}

void FloatToHalf(std::span<const float> in, std::span<Half> out) {
  if (HasF16c()) {
    FloatToHalfF16c(in, out);
  } else {
    FloatToHalfPortable(in, out);
  }
}

void HalfToFloat(std::span<const Half> in, std::span<float> out) {
  if (HasF16c()) {
    HalfToFloatF16c(in, out);
  } else {
    HalfToFloatPortable(in, out);
  }
}

void FloatToBFloat16(std::span<const float> in, std::span<BFloat16> out) {
  DSLAUNCH_CHECK(in.size() == out.size()) << in.size() << " vs " << out.size();
  const size_t n = in.size();
  for (size_t i = 0; i < n; ++i) out[i].bits = BFloat16BitsFromFloat(in[i]);
}

void BFloat16ToFloat(std::span<const BFloat16> in, std::span<float> out) {
  DSLAUNCH_CHECK(in.size() == out.size()) << in.size() << " vs " << out.size();
  const size_t n = in.size();
  for (size_t i = 0; i < n; ++i) out[i] = FloatFromBFloat16Bits(in[i].bits);
}

bool HasInfOrNaN(std::span<const float> values) {
  // Branch-free inner loop over a chunk (vectorizes), early exit between chunks.
  for (size_t start = 0; start < values.size(); start += kScanChunk) {
    const size_t end = std::min(values.size(), start + kScanChunk);
    uint32_t any = 0;
    for (size_t i = start; i < end; ++i) any |= IsInfOrNaNBits(std::bit_cast<uint32_t>(values[i]));
    if (any != 0) return true;
  }
  return false;
}

bool HasInfOrNaN(std::span<const Half> values) {
  const size_t n = values.size();
  uint32_t any = 0;
  for (size_t i = 0; i < n; ++i) any |= Select((values[i].bits & kHalfInfBits) == kHalfInfBits, 1u, 0u);
  return any != 0;
}

bool HasInfOrNaN(std::span<const BFloat16> values) {
  const size_t n = values.size();
  uint32_t any = 0;
  for (size_t i = 0; i < n; ++i) {
    any |= Select((values[i].bits & kBFloat16InfBits) == kBFloat16InfBits, 1u, 0u);
  }
  return any != 0;
}

}  // namespace dslaunch::runtime
