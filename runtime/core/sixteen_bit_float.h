// 16-bit floating-point storage: IEEE 754 binary16 (Half, "fp16") and bfloat16 (BFloat16, "bf16"),
// with conversions from and to fp32. Arithmetic is always done in fp32; these types only store.
// Rounding rules: docs/numerics.md, "16-bit storage".
//
// fp32 -> 16 bit rounds to nearest, ties to even, and is exact on every detail IEEE specifies:
// results below the smallest normal become subnormals (or signed zero), values past the largest
// finite number become infinity (fp16: |x| >= 65520; bf16: past 0x7F7F), infinities stay
// infinities, and NaN stays NaN with its quiet bit set (the sign and the top payload bits kept).
// 16 bit -> fp32 is exact; NaN comes back quiet.
//
// The span conversions are the hot path (weights cast every step, gradients every micro-batch):
// simple branch-free loops, with an F16C path for fp16 chosen at run time when the CPU has it.
// Both paths give bit-identical results (tests compare them). Thread-safe: pure functions.
#pragma once

#include <cstdint>
#include <span>

namespace dslaunch::runtime {

struct Half {
  uint16_t bits = 0;
  friend bool operator==(Half, Half) = default;
};

struct BFloat16 {
  uint16_t bits = 0;
  friend bool operator==(BFloat16, BFloat16) = default;
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2, "16-bit storage types must be 2 bytes");

// fp16 constants (bit patterns).
inline constexpr uint16_t kHalfMaxBits = 0x7BFF;            // 65504
inline constexpr uint16_t kHalfInfBits = 0x7C00;
inline constexpr uint16_t kHalfQuietNaNBits = 0x7E00;
inline constexpr uint16_t kHalfMinSubnormalBits = 0x0001;   // 2^-24
inline constexpr float kHalfMax = 65504.0f;

// bf16 constants (bit patterns).
inline constexpr uint16_t kBFloat16InfBits = 0x7F80;
inline constexpr uint16_t kBFloat16QuietNaNBits = 0x7FC0;

// Scalar conversions.
Half FloatToHalf(float value);
float HalfToFloat(Half value);
BFloat16 FloatToBFloat16(float value);
float BFloat16ToFloat(BFloat16 value);

// Bulk conversions; `out.size()` must equal `in.size()` (DSLAUNCH_CHECKed). Use the best path
// available on this CPU.
void FloatToHalf(std::span<const float> in, std::span<Half> out);
void HalfToFloat(std::span<const Half> in, std::span<float> out);
void FloatToBFloat16(std::span<const float> in, std::span<BFloat16> out);
void BFloat16ToFloat(std::span<const BFloat16> in, std::span<float> out);

// The same fp16 conversions forced onto one path, for tests and benchmarks. The F16C variants must
// only be called when HasF16c() is true.
void FloatToHalfPortable(std::span<const float> in, std::span<Half> out);
void HalfToFloatPortable(std::span<const Half> in, std::span<float> out);
void FloatToHalfF16c(std::span<const float> in, std::span<Half> out);
void HalfToFloatF16c(std::span<const Half> in, std::span<float> out);
bool HasF16c();

// True when any element is +-inf or NaN: the fp16 overflow check on gradients.
bool HasInfOrNaN(std::span<const float> values);
bool HasInfOrNaN(std::span<const Half> values);
bool HasInfOrNaN(std::span<const BFloat16> values);

}  // namespace dslaunch::runtime
