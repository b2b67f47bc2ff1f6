// The kernels of a tensor-parallel GPT part (ops.h, "Tensor parallelism"): the embedding and the
// cross-entropy over a rank's rows of the vocabulary (the bias and residual a row-parallel layer
// adds once its partial products are summed are fused.cc's, with LinearResidualForward). The collectives between them are the model's
// (runtime/models/gpt.h); these only compute.
#include <algorithm>
#include <cmath>

#include "common/simd_clones.h"
#include "runtime/ops/cpu/lane_sum.h"
#include "runtime/ops/cpu/ops.h"
#include "runtime/ops/cpu/simd_exp.h"
#include "runtime/ops/cpu/softmax.h"

namespace dslaunch::runtime::ops {
namespace {

DSLAUNCH_SIMD_CLONES float RowMax(const float* z, int len) {
  float mx = z[0];
#pragma omp simd reduction(max : mx)
  for (int j = 0; j < len; ++j) mx = std::max(mx, z[j]);
  return mx;
}

DSLAUNCH_SIMD_CLONES float ExpRow(const float* __restrict z, float* __restrict p, float mx, int len) {
#pragma omp simd
  for (int j = 0; j < len; ++j) p[j] = SimdExp(z[j] - mx);
  return LaneSum(len, [&](int j) { return p[j]; });
}

DSLAUNCH_SIMD_CLONES void ScaleRow(float* p, float factor, int len) {
#pragma omp simd
  for (int j = 0; j < len; ++j) p[j] *= factor;
}

}  // namespace

void EmbeddingRowsForward(float* out, const int* tokens, const float* wte_rows, int row_begin, int row_end, int n,
                          int c) {
  for (int i = 0; i < n; ++i) {
    float* o = out + static_cast<long>(i) * c;
    const int token = tokens[i];
    if (token >= row_begin && token < row_end) {
      const float* te = wte_rows + static_cast<long>(token - row_begin) * c;
      std::copy(te, te + c, o);
    } else {
      std::fill(o, o + c, 0.0f);
    }
  }
}

void AddPositionEmbedding(float* out, const float* wpe, int b, int t, int c) {
  for (int i = 0; i < b * t; ++i) {
    const float* pe = wpe + static_cast<long>(i % t) * c;
    float* o = out + static_cast<long>(i) * c;
    for (int k = 0; k < c; ++k) o[k] += pe[k];
  }
}

void EmbeddingRowsBackward(float* dwte_rows, float* dwpe, const float* dout, const int* tokens, int row_begin,
                           int row_end, int b, int t, int c) {
  for (int i = 0; i < b * t; ++i) {
    const float* d = dout + static_cast<long>(i) * c;
    const int token = tokens[i];
    if (token >= row_begin && token < row_end) {
      float* dte = dwte_rows + static_cast<long>(token - row_begin) * c;
      for (int k = 0; k < c; ++k) dte[k] += d[k];
    }
    float* dpe = dwpe + static_cast<long>(i % t) * c;
    for (int k = 0; k < c; ++k) dpe[k] += d[k];
  }
}

void SplitSoftmaxMax(float* row_max, const float* logits, int n, int v) {
#pragma omp parallel for if (static_cast<long>(n) * v >= kParallelMinElements)
  for (int r = 0; r < n; ++r) row_max[r] = RowMax(logits + static_cast<long>(r) * v, v);
}

void SplitSoftmaxExp(float* row_sum, float* probs, const float* logits, const float* row_max, int n, int v) {
#pragma omp parallel for if (static_cast<long>(n) * v >= kParallelMinElements)
  for (int r = 0; r < n; ++r) {
    row_sum[r] = ExpRow(logits + static_cast<long>(r) * v, probs + static_cast<long>(r) * v, row_max[r], v);
  }
}

void SplitCrossEntropyForward(float* losses, float* probs, const float* row_sum, const int* targets, int row_begin,
                              int n, int v) {
#pragma omp parallel for if (static_cast<long>(n) * v >= kParallelMinElements)
  for (int r = 0; r < n; ++r) {
    float* p = probs + static_cast<long>(r) * v;
    ScaleRow(p, 1.0f / row_sum[r], v);
    const int local = targets[r] - row_begin;
    losses[r] = local >= 0 && local < v ? -std::log(std::max(p[local], kMinProbability)) : 0.0f;
  }
}

}  // namespace dslaunch::runtime::ops
