#include "runtime/ops/cpu/softmax.h"

#include <algorithm>

#include "common/simd_clones.h"
#include "runtime/ops/cpu/lane_sum.h"
#include "runtime/ops/cpu/simd_exp.h"

namespace dslaunch::runtime::ops {

DSLAUNCH_SIMD_CLONES void SoftmaxRow(const float* in, float* out, int len) {
  float mx = in[0];
#pragma omp simd reduction(max : mx)
  for (int j = 0; j < len; ++j) mx = std::max(mx, in[j]);  // exact in any order
#pragma omp simd
  for (int j = 0; j < len; ++j) out[j] = SimdExp(in[j] - mx);
  const float inv = 1.0f / LaneSum(len, [&](int j) { return out[j]; });
#pragma omp simd
  for (int j = 0; j < len; ++j) out[j] *= inv;
}

DSLAUNCH_SIMD_CLONES void SoftmaxBackwardRow(float* __restrict d, const float* __restrict p, int len) {
  const float w = LaneSum(len, [&](int j) { return d[j] * p[j]; });
#pragma omp simd
  for (int j = 0; j < len; ++j) d[j] = p[j] * (d[j] - w);
}

}  // namespace dslaunch::runtime::ops
