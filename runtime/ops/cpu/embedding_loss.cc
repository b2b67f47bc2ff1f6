// Token/position embeddings and the softmax cross-entropy loss.
#include <algorithm>
#include <cmath>

#include "runtime/ops/cpu/ops.h"
#include "runtime/ops/cpu/softmax.h"

namespace dslaunch::runtime::ops {

void EmbeddingForward(float* out, const int* tokens, const float* wte, const float* wpe, int b, int t, int c) {
  for (int i = 0; i < b * t; ++i) {
    const float* te = wte + static_cast<long>(tokens[i]) * c;
    const float* pe = wpe != nullptr ? wpe + static_cast<long>(i % t) * c : nullptr;
    float* o = out + static_cast<long>(i) * c;
    for (int k = 0; k < c; ++k) o[k] = te[k] + (pe != nullptr ? pe[k] : 0.0f);
  }
}

void EmbeddingBackward(float* dwte, float* dwpe, const float* dout, const int* tokens, int b, int t, int c) {
  for (int i = 0; i < b * t; ++i) {
    const float* d = dout + static_cast<long>(i) * c;
    float* dte = dwte + static_cast<long>(tokens[i]) * c;
    for (int k = 0; k < c; ++k) dte[k] += d[k];
    if (dwpe != nullptr) {
      float* dpe = dwpe + static_cast<long>(i % t) * c;
      for (int k = 0; k < c; ++k) dpe[k] += d[k];
    }
  }
}

void CrossEntropyForward(float* losses, float* probs, const float* logits, const int* targets, int n, int v) {
#pragma omp parallel for if (static_cast<long>(n) * v >= kParallelMinElements)
  for (int r = 0; r < n; ++r) {
    const float* z = logits + static_cast<long>(r) * v;
    float* p = probs + static_cast<long>(r) * v;
    SoftmaxRow(z, p, v);
    losses[r] = -std::log(std::max(p[targets[r]], kMinProbability));
  }
}

void CrossEntropyBackward(float* dlogits, const float* probs, const int* targets, float dloss, int n, int v) {
#pragma omp parallel for if (static_cast<long>(n) * v >= kParallelMinElements)
  for (int r = 0; r < n; ++r) {
    const float* p = probs + static_cast<long>(r) * v;
    float* d = dlogits + static_cast<long>(r) * v;
    for (int k = 0; k < v; ++k) d[k] += (p[k] - (k == targets[r] ? 1.0f : 0.0f)) * dloss;
  }
}

}  // namespace dslaunch::runtime::ops
