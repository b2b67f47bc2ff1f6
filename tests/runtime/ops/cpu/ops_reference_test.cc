// The forward kernels of runtime/ops/cpu/ops.h against the double-precision references of
// tests/runtime/ops/cpu/reference_ops.h, on inputs away from zero so that a wrong constant shows (GELU's
// cubic term vanishes near 0; layer norm's epsilon hides under a large variance). Each tolerance
// is an fp32 rounding-error bound for the kernel's arithmetic, in units of u = 2^-24, stated
// where it is used; the sizes run the one-thread loops and, past ops::kParallelMinElements, the
// OpenMP ones.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "runtime/ops/cpu/ops.h"
#include "runtime/ops/cpu/simd_exp.h"
#include "runtime/ops/cpu/softmax.h"
#include "tests/runtime/ops/cpu/reference_ops.h"

namespace dslaunch::runtime::ops {
namespace {

// fp32 unit roundoff: every correctly rounded operation has relative error at most u.
constexpr double kU = 1.0 / (1 << 24);

// Uniform in [-hi, -lo] u [lo, hi].
std::vector<float> AwayFromZero(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> mag(lo, hi);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> v(n);
  for (auto& x : v) x = negative(rng) ? -mag(rng) : mag(rng);
  return v;
}

TEST_CASE("LinearForward matches the double reference within the dot-product rounding bound, with and without bias") {
  std::mt19937 rng(11);
  const int n = 5, in = 24, out = 7;
  auto x = AwayFromZero(n * in, rng, 0.25f, 2.0f), w = AwayFromZero(out * in, rng, 0.1f, 1.0f),
       bias = AwayFromZero(out, rng, 0.5f, 3.0f);
  for (const float* b : {static_cast<const float*>(bias.data()), static_cast<const float*>(nullptr)}) {
    CAPTURE(b != nullptr);
    std::vector<float> y(n * out, 123.0f);  // overwritten, never accumulated into
    LinearForward(y.data(), x.data(), w.data(), b, n, in, out);
    const std::vector<double> ref = reference::Linear(x.data(), w.data(), b, n, in, out);
    for (int r = 0; r < n; ++r) {
      for (int o = 0; o < out; ++o) {
        // A sum of K = in + 1 products in any order (sgemm blocks and FMAs included) is within
        // gamma_K sum |terms| ~ K u sum |terms| of the exact value (Higham, Accuracy and Stability
        // of Numerical Algorithms, 3.1); one more K for slack.
        double magnitude = b != nullptr ? std::abs(b[o]) : 0.0;
        for (int k = 0; k < in; ++k) magnitude += std::abs(double{x[r * in + k]} * w[o * in + k]);
        const size_t i = static_cast<size_t>(r) * out + o;
        CAPTURE(i);
        CHECK(std::abs(y[i] - ref[i]) <= 2.0 * (in + 1) * kU * magnitude);
      }
    }
  }
}

// Rows of width c: O(1) values (variance ~1), and one narrow row 0.5 +- 0.02 (variance 1.3e-4)
// where epsilon = 1e-5 moves rstd by 3.7%: a wrong epsilon (0, 1e-6, 1e-4, 1e-1) shows there,
// a grossly wrong one everywhere.
void CheckLayerNorm(int n, int c, uint32_t seed) {
  std::mt19937 rng(seed);
  auto x = AwayFromZero(static_cast<size_t>(n) * c, rng, 0.3f, 2.5f);
  std::uniform_real_distribution<float> noise(-0.02f, 0.02f);
  for (int k = 0; k < c; ++k) x[k] = 0.5f + noise(rng);  // row 0: narrow
  auto w = AwayFromZero(c, rng, 0.5f, 1.5f), b = AwayFromZero(c, rng, 0.1f, 0.5f);
  std::vector<float> y(x.size()), mean(n), rstd(n);
  LayerNormForward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c);
  const reference::LayerNormResult ref = reference::LayerNorm(x.data(), w.data(), b.data(), n, c);
  int bad = 0;
  // The premise of the narrow row: its variance is small enough for epsilon to matter.
  REQUIRE(1.0 / (ref.rstd[0] * ref.rstd[0]) - reference::kLayerNormEps < 2e-4);
  for (int r = 0; r < n; ++r) {
    double max_abs = 0.0;
    for (int k = 0; k < c; ++k) max_abs = std::max(max_abs, std::abs(double{x[static_cast<size_t>(r) * c + k]}));
    // The fp32 mean is off by at most ~c u max|x| (a sum of c terms); in units of the row's
    // standard deviation that is kappa, the leading error of every xhat = (x - mean) rstd (and,
    // doubled, of the variance; halved again by the square root). The rest is a few roundings
    // per element and the c-term variance sum.
    const double kappa = (c + 2) * kU * max_abs * ref.rstd[r];
    CAPTURE(r);
    CHECK(std::abs(mean[r] - ref.mean[r]) <= (c + 2) * kU * max_abs);
    CHECK(std::abs(rstd[r] - ref.rstd[r]) <= (2.0 * kappa + (c + 8) * kU) * ref.rstd[r]);
    for (int k = 0; k < c; ++k) {
      const size_t i = static_cast<size_t>(r) * c + k;
      const double xhat = (x[i] - ref.mean[r]) * ref.rstd[r];
      const double tol = std::abs(w[k]) * (kappa * (1.0 + std::abs(xhat)) + (c + 8) * kU * std::abs(xhat)) +
                         4.0 * kU * (std::abs(ref.y[i]) + std::abs(b[k]));
      if (std::abs(y[i] - ref.y[i]) > tol) {
        ++bad;
        CAPTURE(i);
        CAPTURE(y[i]);
        CAPTURE(ref.y[i]);
        CHECK(std::abs(y[i] - ref.y[i]) <= tol);
      }
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("LayerNormForward matches the double reference with GPT-2's epsilon, narrow rows included") {
  CheckLayerNorm(6, 24, 12);
  CheckLayerNorm(64, 1024, 13);  // past kParallelMinElements: the OpenMP loop
}

void CheckGelu(std::vector<float> x) {
  std::vector<float> y(x.size(), 123.0f);
  GeluForward(y.data(), x.data(), static_cast<long>(x.size()));
  int bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double ref = reference::Gelu(x[i]);
    // y = 0.5 x (1 + th), th = 1 - 2 / (1 + SimdExp(2 s (x + 0.044715 x^3))): the argument carries
    // ~4u relative error (a cube, a product, a sum, a product; tanh' <= 1 and |arg| tanh'(arg)
    // <= 0.45), SimdExp 2 ulp, the division and the two subtractions ~3u of an O(1) quantity: at
    // most ~10u absolute in 1 + th, so 5u |x| in y, plus the final products' 2u |y|.
    const double tol = 8.0 * kU * std::abs(x[i]) + 2.0 * kU * std::abs(ref);
    if (std::abs(y[i] - ref) > tol) {
      ++bad;
      CAPTURE(x[i]);
      CAPTURE(y[i]);
      CAPTURE(ref);
      CHECK(std::abs(y[i] - ref) <= tol);
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("GeluForward matches GPT-2's tanh approximation in double away from zero and in saturation") {
  // At x = 2 the cubic term moves GELU by 0.033: 0.044715 -> 0 is caught many times over.
  CheckGelu({1.0f, -1.0f, 2.0f, -2.0f, 3.0f, -3.0f, 0.5f, -0.5f, 6.0f, -6.0f, 10.0f, -10.0f});
  std::mt19937 rng(14);
  CheckGelu(AwayFromZero(37, rng, 0.25f, 5.0f));
  CheckGelu(AwayFromZero(kParallelMinElements + 3, rng, 0.25f, 5.0f));  // the OpenMP loop
}

// Relative error of a softmax probability: z - max rounds with error u |z - max|, which exp
// turns into relative error; SimdExp adds 2 ulp (2.5u), the sum of `len` terms len u (any order),
// the reciprocal and the product 2u.
double SoftmaxRelTol(const float* z, int len) {
  const float mx = *std::max_element(z, z + len), mn = *std::min_element(z, z + len);
  return (static_cast<double>(mx - mn) + len + 6.0) * kU;
}

// Logits spread over [-6, 6]; one row shifted by +100 (exp(106) is past fp32, so only the
// max-subtraction keeps it right) and one by -100 (exp(-94) underflows without it).
std::vector<float> Logits(int n, int v, uint32_t seed) {
  std::mt19937 rng(seed);
  auto z = AwayFromZero(static_cast<size_t>(n) * v, rng, 0.1f, 6.0f);
  for (int k = 0; k < v; ++k) z[k] += 100.0f;
  for (int k = 0; k < v; ++k) z[static_cast<size_t>(v) + k] -= 100.0f;
  return z;
}

TEST_CASE("SoftmaxRow matches the double softmax, in place and with large offsets") {
  const int n = 4, v = 37;
  std::vector<float> z = Logits(n, v, 15);
  for (int r = 0; r < n; ++r) {
    const float* row = z.data() + static_cast<size_t>(r) * v;
    const std::vector<double> ref = reference::Softmax(row, v);
    const double rel = SoftmaxRelTol(row, v);
    std::vector<float> p(v), in_place(row, row + v);
    SoftmaxRow(row, p.data(), v);
    SoftmaxRow(in_place.data(), in_place.data(), v);
    CAPTURE(r);
    for (int k = 0; k < v; ++k) {
      CAPTURE(k);
      CHECK(std::abs(p[k] - ref[k]) <= rel * ref[k]);
      CHECK(in_place[k] == p[k]);
    }
  }
}

void CheckCrossEntropy(int n, int v, uint32_t seed) {
  std::vector<float> z = Logits(n, v, seed);
  std::vector<int> targets(n);
  for (int r = 0; r < n; ++r) {
    const float* row = z.data() + static_cast<size_t>(r) * v;
    // Alternate the most likely class and the least likely one (a loss of ~12 nats).
    targets[r] = static_cast<int>((r % 2 == 0 ? std::max_element(row, row + v) : std::min_element(row, row + v)) - row);
  }
  std::vector<float> losses(n), probs(z.size());
  CrossEntropyForward(losses.data(), probs.data(), z.data(), targets.data(), n, v);
  int bad = 0;
  for (int r = 0; r < n; ++r) {
    const float* row = z.data() + static_cast<size_t>(r) * v;
    const std::vector<double> ref_p = reference::Softmax(row, v);
    const double ref_loss = reference::CrossEntropy(row, v, targets[r]);
    const double rel = SoftmaxRelTol(row, v);
    // -log p: p's relative error becomes the loss's absolute error; log adds u |loss|.
    bad += std::abs(losses[r] - ref_loss) <= rel + 2.0 * kU * std::abs(ref_loss) ? 0 : 1;
    for (int k = 0; k < v; ++k) {
      bad += std::abs(probs[static_cast<size_t>(r) * v + k] - ref_p[k]) <= rel * ref_p[k] ? 0 : 1;
    }
    if (bad != 0) {
      CAPTURE(r);
      CAPTURE(losses[r]);
      CAPTURE(ref_loss);
      REQUIRE(bad == 0);
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("CrossEntropyForward matches -log softmax in double for likely and unlikely targets") {
  CheckCrossEntropy(6, 11, 16);
  CheckCrossEntropy(64, 600, 17);  // past kParallelMinElements: the OpenMP loop
}

}  // namespace
}  // namespace dslaunch::runtime::ops
