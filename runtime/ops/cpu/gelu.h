// GELU's tanh approximation (GPT-2's) and its derivative for one element, in plain arithmetic
// that vectorizes (tanh through SimdExp): the one place of the formula, shared by the GELU
// kernels and the fused ones (runtime/ops/cpu/fused.cc). Formulas: docs/model.md.
#pragma once

#include "runtime/ops/cpu/simd_exp.h"

namespace dslaunch::runtime::ops {

// sqrt(2/pi) and the cubic coefficient of GPT-2's tanh approximation of GELU.
inline constexpr float kGeluScale = 0.7978845608028654f;
inline constexpr float kGeluCubic = 0.044715f;

// tanh(u) = 1 - 2 / (1 + exp(2u)), vectorizable (std::tanh is a scalar libm call); saturates to
// +-1 exactly for |u| > ~9, since SimdExp clamps instead of overflowing.
inline float TanhViaExp(float u) { return 1.0f - 2.0f / (1.0f + SimdExp(2.0f * u)); }

inline float Gelu(float x) { return 0.5f * x * (1.0f + TanhViaExp(kGeluScale * (x + kGeluCubic * x * x * x))); }

// d GELU(x) / dx.
inline float GeluGrad(float x) {
  const float th = TanhViaExp(kGeluScale * (x + kGeluCubic * x * x * x));
  const float sech2 = 1.0f - th * th;
  return 0.5f * (1.0f + th) + 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
}

}  // namespace dslaunch::runtime::ops
