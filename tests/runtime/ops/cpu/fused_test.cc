// The fused and SIMD-cloned kernels (docs/engine.md, "Elementwise kernels") against what they
// replace, bit for bit: each fused op against the unfused ops it stands for, each kSet against
// zeroing then adding, and each cloned kernel (this CPU's widest clone runs here) against the
// same formula evaluated one element at a time in this test, compiled for the baseline: the
// clones must not change a bit. The row sums against the 16-lane order written out by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/ops/cpu/gelu.h"
#include "runtime/ops/cpu/lane_sum.h"
#include "runtime/ops/cpu/ops.h"
#include "runtime/ops/cpu/simd_exp.h"
#include "runtime/ops/cpu/softmax.h"

namespace dslaunch::runtime::ops {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Odd sizes: a partial vector at every row's end, in every clone.
constexpr int kRows = 37, kIn = 45, kOut = 83;

TEST_CASE("LinearGeluForward equals LinearForward then GeluForward, bit for bit") {
  const auto x = Random(kRows * kIn, 1), w = Random(kOut * kIn, 2, 0.3f), b = Random(kOut, 3);
  std::vector<float> pre(kRows * kOut), out(kRows * kOut), pre2(kRows * kOut), out2(kRows * kOut);
  LinearGeluForward(pre.data(), out.data(), x.data(), w.data(), b.data(), kRows, kIn, kOut);
  LinearForward(pre2.data(), x.data(), w.data(), b.data(), kRows, kIn, kOut);
  GeluForward(out2.data(), pre2.data(), static_cast<long>(out2.size()));
  CHECK(SameBits(pre, pre2));
  CHECK(SameBits(out, out2));
}

TEST_CASE("LinearResidualForward equals LinearForward then the residual added, bit for bit") {
  const auto x = Random(kRows * kIn, 4), w = Random(kOut * kIn, 5, 0.3f), b = Random(kOut, 6);
  const auto res = Random(kRows * kOut, 7);
  std::vector<float> out(kRows * kOut), want(kRows * kOut);
  LinearResidualForward(out.data(), x.data(), w.data(), b.data(), res.data(), kRows, kIn, kOut);
  LinearForward(want.data(), x.data(), w.data(), b.data(), kRows, kIn, kOut);
  for (size_t i = 0; i < want.size(); ++i) want[i] += res[i];
  CHECK(SameBits(out, want));
}

TEST_CASE("GeluBackwardBias equals GeluBackward into zeros then the column sums, bit for bit") {
  // Inputs below about -5 saturate tanh: a zero derivative times a negative dout is -0 there.
  const auto in = Random(kRows * kOut, 8, 2.0f), dout = Random(kRows * kOut, 9);
  auto dbias = Random(kOut, 10), dbias2 = dbias;
  std::vector<float> din(kRows * kOut, 123.0f), din2(kRows * kOut, 0.0f);  // kSet: what was there goes
  GeluBackwardBias(din.data(), dbias.data(), dout.data(), in.data(), kRows, kOut);
  GeluBackward(din2.data(), dout.data(), in.data(), static_cast<long>(din2.size()));
  for (int r = 0; r < kRows; ++r) {
    for (int o = 0; o < kOut; ++o) dbias2[o] += din2[r * kOut + o];
  }
  CHECK(SameBits(din, din2));
  CHECK(SameBits(dbias, dbias2));
}

TEST_CASE("LinearBackward with GradMode::kSet equals zeroing din then adding, and leaves the other gradients "
          "accumulating") {
  const auto x = Random(kRows * kIn, 11), w = Random(kOut * kIn, 12), dout = Random(kRows * kOut, 13);
  auto dw = Random(kOut * kIn, 14), db = Random(kOut, 15), dw2 = dw, db2 = db;
  std::vector<float> din(kRows * kIn, -7.0f), din2(kRows * kIn, 0.0f);
  LinearBackward(din.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), kRows, kIn, kOut, GradMode::kSet);
  LinearBackward(din2.data(), dw2.data(), db2.data(), dout.data(), x.data(), w.data(), kRows, kIn, kOut);
  CHECK(SameBits(din, din2));
  CHECK(SameBits(dw, dw2));
  CHECK(SameBits(db, db2));
}

TEST_CASE("The cloned GELU kernels give the baseline formula's bits on this CPU, across the whole range") {
  // Past both saturations of tanh and SimdExp's clamps.
  std::vector<float> in = Random(5003, 16, 4.0f);
  for (float edge : {0.0f, -0.0f, 9.5f, -9.5f, 40.0f, -40.0f, 1e-20f}) in.push_back(edge);
  const auto dout = Random(in.size(), 17);
  std::vector<float> out(in.size()), din(in.size(), 0.5f);
  GeluForward(out.data(), in.data(), static_cast<long>(in.size()));
  GeluBackward(din.data(), dout.data(), in.data(), static_cast<long>(in.size()));
  for (size_t i = 0; i < in.size(); ++i) {
    CAPTURE(in[i]);
    const float want = Gelu(in[i]), want_grad = 0.5f + GeluGrad(in[i]) * dout[i];
    REQUIRE(std::memcmp(&out[i], &want, sizeof(float)) == 0);
    REQUIRE(std::memcmp(&din[i], &want_grad, sizeof(float)) == 0);
  }
}

// LaneSum's order spelled out: 16 running sums, element j into sum j % 16, then the 16 in order.
float SixteenLaneSum(const float* x, int n) {
  float acc[16] = {};
  for (int j = 0; j < n; ++j) acc[j % 16] += x[j];
  float s = 0.0f;
  for (float a : acc) s += a;
  return s;
}

TEST_CASE("SoftmaxRow and SoftmaxBackwardRow sum in the 16-lane order on every CPU, empty tails to long rows") {
  for (int len : {1, 2, 15, 16, 17, 31, 64, 255, 256}) {
    CAPTURE(len);
    const auto in = Random(len, 18 + len, 3.0f);
    std::vector<float> p(len);
    SoftmaxRow(in.data(), p.data(), len);
    float mx = in[0];
    for (float z : in) mx = std::max(mx, z);
    std::vector<float> e(len);
    for (int j = 0; j < len; ++j) e[j] = SimdExp(in[j] - mx);
    const float inv = 1.0f / SixteenLaneSum(e.data(), len);
    for (int j = 0; j < len; ++j) e[j] *= inv;
    CHECK(SameBits(p, e));
    // In place gives the same.
    std::vector<float> same = in;
    SoftmaxRow(same.data(), same.data(), len);
    CHECK(SameBits(same, p));

    auto d = Random(len, 40 + len);
    std::vector<float> prod(len), want(len);
    for (int j = 0; j < len; ++j) prod[j] = d[j] * p[j];
    const float w = SixteenLaneSum(prod.data(), len);
    for (int j = 0; j < len; ++j) want[j] = p[j] * (d[j] - w);
    SoftmaxBackwardRow(d.data(), p.data(), len);
    CHECK(SameBits(d, want));
  }
}

TEST_CASE("LayerNormForward's mean and variance are 16-lane sums, whatever the row width") {
  for (int c : {1, 7, 16, 33, 512}) {
    CAPTURE(c);
    const int n = 3;
    const auto x = Random(n * c, 60 + c, 2.0f), w = Random(c, 61), b = Random(c, 62);
    std::vector<float> y(n * c), mean(n), rstd(n);
    LayerNormForward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c);
    for (int r = 0; r < n; ++r) {
      const float* row = x.data() + r * c;
      const float m = SixteenLaneSum(row, c) / static_cast<float>(c);
      std::vector<float> sq(c);
      for (int i = 0; i < c; ++i) sq[i] = (row[i] - m) * (row[i] - m);
      const float s = 1.0f / std::sqrt(SixteenLaneSum(sq.data(), c) / static_cast<float>(c) + kLayerNormEps);
      CHECK(mean[r] == m);
      CHECK(rstd[r] == s);
      for (int i = 0; i < c; ++i) REQUIRE(y[r * c + i] == (row[i] - m) * s * w[i] + b[i]);
    }
  }
}

}  // namespace
}  // namespace dslaunch::runtime::ops
