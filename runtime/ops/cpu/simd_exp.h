// SimdExp: exp(x) for fp32 in plain arithmetic that GCC vectorizes (`#pragma omp simd` loops), for
// the elementwise hot loops of runtime/ops/cpu/ops.h (softmax.h's rows, gelu.h's tanh). glibc's
// expf and tanhf are scalar calls: GELU on them took ~13% of a GPT training step
// (docs/benchmarks.md, "Training speed").
//
// Accuracy: within 2 ulp of expf over [-87, 88] (Cody-Waite range reduction, degree-6 polynomial);
// inputs are clamped to that range, so large arguments give FLT_MAX-scale values, never inf, and
// very negative ones the smallest normal float, never 0 or a denormal. NaN is not propagated.
#pragma once

#include <bit>
#include <cstdint>

namespace dslaunch::runtime::ops {

inline float SimdExp(float x) {
  // Clamp so that 2^n below stays a normal float: exp(88.37) ~ 2^127.5, exp(-87.33) ~ 2^-126.
  constexpr float kMax = 88.3762626647949f;
  constexpr float kMin = -87.3365447505531f;
  constexpr float kLog2e = 1.44269504088896341f;
  // ln 2 split in two so that n * kLn2Hi is exact for the n that occur (|n| <= 128).
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  // Adding 1.5 * 2^23 rounds a float of magnitude < 2^22 to the nearest integer (no SSE4.1 needed).
  constexpr float kRound = 12582912.0f;
  x = x > kMax ? kMax : x;
  x = x < kMin ? kMin : x;
  const float shifted = x * kLog2e + kRound;
  const float n = shifted - kRound;
  const int32_t ni = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kRound);
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;  // |r| <= ln2 / 2
  // exp(r) on [-ln2/2, ln2/2]: Taylor-like minimax coefficients (Cephes expf).
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * r * r + r + 1.0f;
  const float two_n = std::bit_cast<float>(static_cast<int32_t>((ni + 127) << 23));
  return er * two_n;
}

}  // namespace dslaunch::runtime::ops
