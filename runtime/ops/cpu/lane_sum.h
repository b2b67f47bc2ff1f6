// Sums whose order does not depend on the vector width: element j goes into running sum j % 16,
// then the 16 running sums are added in order. A loop of 16 independent sums vectorizes as four
// 4-float registers on the baseline, two with AVX2 and one with AVX-512, each lane doing the same
// additions, so every SIMD clone (common/simd_clones.h) and every CPU gets the same bits, where
// a `#pragma omp simd reduction` would split the sum one way per width (docs/numerics.md,
// "Sums in the row kernels").
#pragma once

namespace dslaunch::runtime::ops {

inline constexpr int kSumLanes = 16;

// The sum over j < n of term(j), in the order above. `term` must be elementwise and cheap.
template <class Term>
inline float LaneSum(int n, Term term) {
  float acc[kSumLanes] = {};
  int j = 0;
  for (; j + kSumLanes <= n; j += kSumLanes) {
#pragma omp simd
    for (int k = 0; k < kSumLanes; ++k) acc[k] += term(j + k);
  }
  for (int k = 0; j + k < n; ++k) acc[k] += term(j + k);
  float sum = 0.0f;
  for (int k = 0; k < kSumLanes; ++k) sum += acc[k];
  return sum;
}

}  // namespace dslaunch::runtime::ops
