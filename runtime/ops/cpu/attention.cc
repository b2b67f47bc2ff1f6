// Causal multi-head self-attention, forward and backward, as sgemm calls per (batch, head) on
// blocks of query rows (docs/model.md, "Causal attention"). Only the blocks on or below the
// diagonal are computed: with T = 256 and kRowBlock = 64 that is 10 of 16 blocks.
#include <algorithm>
#include <cmath>
#include <vector>

#include <cblas.h>

#include "runtime/ops/cpu/ops.h"
#include "runtime/ops/cpu/softmax.h"

namespace dslaunch::runtime::ops {
namespace {

// Query rows per sgemm call. Smaller blocks skip more of the masked upper triangle but make
// smaller, less efficient matrix products; 64 rows keep each product at 64 x (64..T) x hs.
constexpr int kRowBlock = 64;

// One head of one sequence: the first of its T rows of q, k and v, each row ld_qkv = 3C apart.
struct HeadView {
  const float* q;
  const float* k;
  const float* v;
  long ld_qkv;
};

HeadView Head(const float* qkv, int bi, int h, int t, int c, int hs) {
  const long ld = 3L * c;
  const float* base = qkv + static_cast<long>(bi) * t * ld + static_cast<long>(h) * hs;
  return HeadView{base, base + c, base + 2L * c, ld};
}

}  // namespace

void AttentionForward(float* out, float* att, const float* qkv, int b, int t, int c, int nh) {
  const int hs = c / nh;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int bi = 0; bi < b; ++bi) {
    for (int h = 0; h < nh; ++h) {
      const HeadView x = Head(qkv, bi, h, t, c, hs);
      float* p = att + (static_cast<long>(bi) * nh + h) * t * t;
      float* y = out + static_cast<long>(bi) * t * c + static_cast<long>(h) * hs;
      for (int r0 = 0; r0 < t; r0 += kRowBlock) {
        const int rows = std::min(kRowBlock, t - r0), cols = r0 + rows;
        float* pb = p + static_cast<long>(r0) * t;
        // S = scale q k^T for keys [0, cols): the block's rows see no key beyond its last row.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, hs, scale, x.q + r0 * x.ld_qkv, x.ld_qkv,
                    x.k, x.ld_qkv, 0.0f, pb, t);
        for (int i = 0; i < rows; ++i) {
          float* row = pb + static_cast<long>(i) * t;
          const int len = r0 + i + 1;
          SoftmaxRow(row, row, len);
          std::fill(row + len, row + t, 0.0f);
        }
        // Y = P V over the same keys (the zeros above the diagonal add nothing).
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hs, cols, 1.0f, pb, t, x.v, x.ld_qkv, 0.0f,
                    y + static_cast<long>(r0) * c, c);
      }
    }
  }
}

void AttentionBackward(float* dqkv, const float* dout, const float* qkv, const float* att, int b, int t, int c,
                       int nh) {
  const int hs = c / nh;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  // dP, then dS in place: one head's [T][T] at a time.
  std::vector<float> ds(static_cast<size_t>(t) * t);
  for (int bi = 0; bi < b; ++bi) {
    for (int h = 0; h < nh; ++h) {
      const HeadView x = Head(qkv, bi, h, t, c, hs);
      const long ld = x.ld_qkv;
      float* dq = dqkv + (x.q - qkv);
      float* dk = dqkv + (x.k - qkv);
      float* dv = dqkv + (x.v - qkv);
      const float* p = att + (static_cast<long>(bi) * nh + h) * t * t;
      const float* dy = dout + static_cast<long>(bi) * t * c + static_cast<long>(h) * hs;
      // Row blocks: dP = dY V^T, then the softmax backward dS = P (dP - rowsum(dP P)).
      for (int r0 = 0; r0 < t; r0 += kRowBlock) {
        const int rows = std::min(kRowBlock, t - r0), cols = r0 + rows;
        float* db = ds.data() + static_cast<long>(r0) * t;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, hs, 1.0f, dy + static_cast<long>(r0) * c, c,
                    x.v, ld, 0.0f, db, t);
        for (int i = 0; i < rows; ++i) {
          float* d = db + static_cast<long>(i) * t;
          const float* pr = p + static_cast<long>(r0 + i) * t;
          const int len = r0 + i + 1;
          SoftmaxBackwardRow(d, pr, len);
          // The block's products below read up to column cols: masked entries carry no gradient.
          std::fill(d + len, d + cols, 0.0f);
        }
        // dQ += scale dS K over the block's keys.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hs, cols, scale, db, t, x.k, ld, 1.0f,
                    dq + r0 * ld, ld);
      }
      // Column blocks: key rows [c0, c0 + cols) are seen by queries [c0, T) only.
      for (int c0 = 0; c0 < t; c0 += kRowBlock) {
        const int cols = std::min(kRowBlock, t - c0), rows = t - c0;
        const long off = static_cast<long>(c0) * t + c0;
        // dV += P^T dY; dK += scale dS^T Q.
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, hs, rows, 1.0f, p + off, t,
                    dy + static_cast<long>(c0) * c, c, 1.0f, dv + c0 * ld, ld);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, hs, rows, scale, ds.data() + off, t,
                    x.q + c0 * ld, ld, 1.0f, dk + c0 * ld, ld);
      }
    }
  }
}

}  // namespace dslaunch::runtime::ops
