#include "runtime/ops/cpu/ops.h"

namespace dslaunch::runtime::ops {

void ReluForward(float* out, const float* in, long count) {
#pragma omp parallel for if (count >= kParallelMinElements)
  for (long i = 0; i < count; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

void ReluBackward(float* din, const float* dout, const float* in, long count) {
#pragma omp parallel for if (count >= kParallelMinElements)
  for (long i = 0; i < count; ++i) din[i] += in[i] > 0.0f ? dout[i] : 0.0f;
}

}  // namespace dslaunch::runtime::ops
