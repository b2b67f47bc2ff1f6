// Every backward of runtime/ops/cpu/ops.h against central finite differences of L = sum(out * R), R random;
// the blocked attention also against a loop-by-loop reference in double.
#include "runtime/ops/cpu/ops.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "runtime/ops/cpu/simd_exp.h"

namespace dslaunch::runtime::ops {
namespace {

std::vector<float> Random(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// Finite-difference step and tolerances for fp32 kernels on O(1) inputs: the central difference's
// truncation error is O(eps^2) ~ 1e-6, its rounding error ~ 1e-7 * |L| / eps ~ 1e-4.
constexpr float kEps = 1e-3f;
constexpr double kAbsTol = 2e-3;
constexpr double kRelTol = 2e-2;

// Compares `analytic` (dL/dx) with central differences of `loss` over every element of `x`.
void CheckGradient(std::vector<float>& x, const std::vector<float>& analytic, const std::function<double()>& loss,
                   const char* what) {
  REQUIRE(x.size() == analytic.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float saved = x[i];
    x[i] = saved + kEps;
    const double plus = loss();
    x[i] = saved - kEps;
    const double minus = loss();
    x[i] = saved;
    const double numeric = (plus - minus) / (2.0 * kEps);
    CAPTURE(what);
    CAPTURE(i);
    CAPTURE(numeric);
    CAPTURE(analytic[i]);
    CHECK(std::abs(numeric - analytic[i]) <= kAbsTol + kRelTol * std::max(std::abs(numeric), std::abs(double{analytic[i]})));
  }
}

TEST_CASE("Linear backward matches finite differences and accumulates") {
  std::mt19937 rng(1);
  const int n = 3, in = 4, out = 5;
  auto x = Random(n * in, rng), w = Random(out * in, rng), bias = Random(out, rng), r = Random(n * out, rng);
  std::vector<float> y(n * out);
  auto loss = [&] {
    LinearForward(y.data(), x.data(), w.data(), bias.data(), n, in, out);
    return Dot(y, r);
  };
  std::vector<float> dx(n * in, 0.5f), dw(out * in, 0.0f), db(out, 0.0f);
  LinearBackward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), n, in, out);
  for (auto& g : dx) g -= 0.5f;  // backward adds to what was there
  CheckGradient(x, dx, loss, "dx");
  CheckGradient(w, dw, loss, "dweight");
  CheckGradient(bias, db, loss, "dbias");
}

TEST_CASE("LayerNorm backward matches finite differences") {
  std::mt19937 rng(2);
  const int n = 3, c = 6;
  auto x = Random(n * c, rng, 2.0f), w = Random(c, rng), bias = Random(c, rng), r = Random(n * c, rng);
  std::vector<float> y(n * c), mean(n), rstd(n);
  auto loss = [&] {
    LayerNormForward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), bias.data(), n, c);
    return Dot(y, r);
  };
  loss();
  std::vector<float> dx(n * c, 0.0f), dw(c, 0.0f), db(c, 0.0f);
  LayerNormBackward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), mean.data(), rstd.data(), n, c);
  CheckGradient(x, dx, loss, "dx");
  CheckGradient(w, dw, loss, "dweight");
  CheckGradient(bias, db, loss, "dbias");
}

TEST_CASE("GELU backward matches finite differences") {
  std::mt19937 rng(3);
  auto x = Random(12, rng, 3.0f), r = Random(12, rng);
  std::vector<float> y(12);
  auto loss = [&] {
    GeluForward(y.data(), x.data(), 12);
    return Dot(y, r);
  };
  std::vector<float> dx(12, 0.0f);
  GeluBackward(dx.data(), r.data(), x.data(), 12);
  CheckGradient(x, dx, loss, "dx");
  GeluForward(y.data(), x.data(), 12);
  std::vector<float> zero = {0.0f}, out = {1.0f};
  GeluForward(out.data(), zero.data(), 1);
  CHECK(out[0] == 0.0f);
}

TEST_CASE("Embedding backward matches finite differences, repeated tokens included") {
  std::mt19937 rng(4);
  const int b = 2, t = 3, c = 4, v = 5;
  std::vector<int> tokens = {1, 3, 1, 4, 4, 0};
  auto wte = Random(v * c, rng), wpe = Random(t * c, rng), r = Random(b * t * c, rng);
  std::vector<float> y(b * t * c);
  auto loss = [&] {
    EmbeddingForward(y.data(), tokens.data(), wte.data(), wpe.data(), b, t, c);
    return Dot(y, r);
  };
  std::vector<float> dwte(v * c, 0.0f), dwpe(t * c, 0.0f);
  EmbeddingBackward(dwte.data(), dwpe.data(), r.data(), tokens.data(), b, t, c);
  CheckGradient(wte, dwte, loss, "dwte");
  CheckGradient(wpe, dwpe, loss, "dwpe");
}

TEST_CASE("Causal attention backward matches finite differences and ignores the future") {
  std::mt19937 rng(5);
  const int b = 2, t = 4, c = 8, nh = 2;
  auto qkv = Random(b * t * 3 * c, rng), r = Random(b * t * c, rng);
  std::vector<float> y(b * t * c), att(b * nh * t * t);
  auto loss = [&] {
    AttentionForward(y.data(), att.data(), qkv.data(), b, t, c, nh);
    return Dot(y, r);
  };
  loss();
  std::vector<float> dqkv(qkv.size(), 0.0f);
  AttentionBackward(dqkv.data(), r.data(), qkv.data(), att.data(), b, t, c, nh);
  CheckGradient(qkv, dqkv, loss, "dqkv");
  // The first position attends only to itself: its output is its own v.
  for (int i = 0; i < c; ++i) CHECK(y[i] == doctest::Approx(qkv[2 * c + i]));
}

// The attention of one (batch, head) written out loop by loop, in double: the reference the
// blocked sgemm kernels are compared with.
void ReferenceAttention(std::vector<double>& y, std::vector<double>& dqkv, const std::vector<float>& qkv,
                        const std::vector<float>& dy, int b, int t, int c, int nh) {
  const int hs = c / nh;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  y.assign(static_cast<size_t>(b) * t * c, 0.0);
  dqkv.assign(qkv.size(), 0.0);
  auto at = [&](int bi, int ti, int part, int h, int i) {
    return ((static_cast<size_t>(bi) * t + ti) * 3 + part) * c + h * hs + i;
  };
  for (int bi = 0; bi < b; ++bi) {
    for (int h = 0; h < nh; ++h) {
      for (int tq = 0; tq < t; ++tq) {
        std::vector<double> p(tq + 1), dp(tq + 1);
        double mx = -1e300, sum = 0;
        for (int tk = 0; tk <= tq; ++tk) {
          double s = 0;
          for (int i = 0; i < hs; ++i) s += double{qkv[at(bi, tq, 0, h, i)]} * qkv[at(bi, tk, 1, h, i)];
          p[tk] = s * scale;
          mx = std::max(mx, p[tk]);
        }
        for (auto& e : p) sum += (e = std::exp(e - mx));
        for (auto& e : p) e /= sum;
        const size_t yo = (static_cast<size_t>(bi) * t + tq) * c + h * hs;
        double w = 0;
        for (int tk = 0; tk <= tq; ++tk) {
          for (int i = 0; i < hs; ++i) {
            y[yo + i] += p[tk] * qkv[at(bi, tk, 2, h, i)];
            dp[tk] += double{dy[yo + i]} * qkv[at(bi, tk, 2, h, i)];
            dqkv[at(bi, tk, 2, h, i)] += p[tk] * dy[yo + i];
          }
          w += p[tk] * dp[tk];
        }
        for (int tk = 0; tk <= tq; ++tk) {
          const double ds = p[tk] * (dp[tk] - w) * scale;
          for (int i = 0; i < hs; ++i) {
            dqkv[at(bi, tq, 0, h, i)] += ds * qkv[at(bi, tk, 1, h, i)];
            dqkv[at(bi, tk, 1, h, i)] += ds * qkv[at(bi, tq, 0, h, i)];
          }
        }
      }
    }
  }
}

TEST_CASE("Blocked attention matches a loop-by-loop reference across row blocks, heads and sequences") {
  std::mt19937 rng(8);
  // T = 150 spans three row blocks of 64, the last one partial; 3 heads of 8.
  const int b = 2, t = 150, c = 24, nh = 3;
  auto qkv = Random(static_cast<size_t>(b) * t * 3 * c, rng, 2.0f), dy = Random(static_cast<size_t>(b) * t * c, rng);
  std::vector<float> y(dy.size(), 7.0f), att(static_cast<size_t>(b) * nh * t * t, 7.0f), dqkv(qkv.size(), 0.5f);
  AttentionForward(y.data(), att.data(), qkv.data(), b, t, c, nh);
  AttentionBackward(dqkv.data(), dy.data(), qkv.data(), att.data(), b, t, c, nh);
  std::vector<double> ref_y, ref_dqkv;
  ReferenceAttention(ref_y, ref_dqkv, qkv, dy, b, t, c, nh);
  auto close = [](double got, double want) { return std::abs(got - want) <= 1e-5 + 1e-4 * std::abs(want); };
  int bad = 0;
  for (size_t i = 0; i < y.size(); ++i) bad += close(y[i], ref_y[i]) ? 0 : 1;
  for (size_t i = 0; i < dqkv.size(); ++i) bad += close(dqkv[i] - 0.5, ref_dqkv[i]) ? 0 : 1;  // accumulated
  CHECK(bad == 0);
  // The probabilities are a causal, normalised matrix: zeros above the diagonal, rows summing to 1.
  for (int row = 0; row < b * nh * t; ++row) {
    const int tq = row % t;
    double sum = 0;
    for (int tk = 0; tk < t; ++tk) {
      const float a = att[static_cast<size_t>(row) * t + tk];
      if (tk > tq) CHECK(a == 0.0f);
      sum += a;
    }
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
  }
}

TEST_CASE("SimdExp stays within a few ulp of std::exp and clamps instead of overflowing") {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(SimdExp(x) - want) / want);
  }
  CHECK(worst < 3e-7);  // 2.5 ulp at 2^-23 = 1.19e-7
  CHECK(SimdExp(0.0f) == 1.0f);
  CHECK(std::isfinite(SimdExp(1000.0f)));
  CHECK(SimdExp(-1000.0f) > 0.0f);
  CHECK(SimdExp(-1000.0f) < 1.2e-38f);
}

TEST_CASE("Cross-entropy backward matches finite differences of the summed loss") {
  std::mt19937 rng(6);
  const int n = 3, v = 5;
  auto logits = Random(n * v, rng, 3.0f);
  std::vector<int> targets = {0, 4, 2};
  std::vector<float> losses(n), probs(n * v);
  auto loss = [&] {
    CrossEntropyForward(losses.data(), probs.data(), logits.data(), targets.data(), n, v);
    double s = 0;
    for (float l : losses) s += l;
    return s;
  };
  loss();
  std::vector<float> dlogits(n * v, 0.0f);
  CrossEntropyBackward(dlogits.data(), probs.data(), targets.data(), 1.0f, n, v);
  CheckGradient(logits, dlogits, loss, "dlogits");
  // Uniform logits give log(V).
  std::vector<float> flat(v, 0.0f), p(v), l(1);
  int target = 2;
  CrossEntropyForward(l.data(), p.data(), flat.data(), &target, 1, v);
  CHECK(l[0] == doctest::Approx(std::log(5.0)));
}

TEST_CASE("ReLU backward matches finite differences and passes nothing where the input was <= 0") {
  std::mt19937 rng(7);
  auto x = Random(16, rng, 3.0f), r = Random(16, rng);
  // Keep every input off the kink, where the central difference would straddle it.
  for (auto& v : x) v += v >= 0.0f ? 0.01f : -0.01f;
  std::vector<float> y(16);
  auto loss = [&] {
    ReluForward(y.data(), x.data(), 16);
    return Dot(y, r);
  };
  std::vector<float> dx(16, 0.25f);
  ReluBackward(dx.data(), r.data(), x.data(), 16);
  for (auto& g : dx) g -= 0.25f;  // backward adds to what was there
  CheckGradient(x, dx, loss, "dx");
  std::vector<float> in = {-2.0f, 0.0f, 3.0f}, out(3), din(3, 0.0f), dout = {1.0f, 1.0f, 1.0f};
  ReluForward(out.data(), in.data(), 3);
  CHECK(out == std::vector<float>{0.0f, 0.0f, 3.0f});
  ReluBackward(din.data(), dout.data(), in.data(), 3);
  CHECK(din == std::vector<float>{0.0f, 0.0f, 1.0f});
}

}  // namespace
}  // namespace dslaunch::runtime::ops
