// Softmax over one row, forward and backward, for attention's rows and the cross-entropy's:
// cloned for AVX-512 and AVX2 (common/simd_clones.h), exp through SimdExp, the row sums in a
// width-independent order (lane_sum.h), so the same bits on every CPU. Internal to
// runtime/ops/cpu (ops.h is the interface).
#pragma once

namespace dslaunch::runtime::ops {

// The floor under a target's probability before its log: the loss stays finite when the softmax
// underflows to 0 (the cross-entropy, whole and split).
inline constexpr float kMinProbability = 1e-30f;

// out[0..len) = softmax(in[0..len)), max-subtracted; `out` may be `in` (in place). len >= 1.
void SoftmaxRow(const float* in, float* out, int len);

// The softmax backward of one row, in place: d = p * (d - sum_j d[j] p[j]), with d the gradient
// of the probabilities p on entry and of the scores on return.
void SoftmaxBackwardRow(float* d, const float* p, int len);

}  // namespace dslaunch::runtime::ops
