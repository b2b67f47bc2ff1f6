#include "runtime/engine/optimizer.h"

#include <doctest/doctest.h>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace dslaunch::runtime {
namespace {

// The Adam(W) update one element at a time, as the runtime wrote it before its SIMD clones and
// threads: compiled here for the baseline, it is the bits every clone must reproduce.
void ReferenceAdam(const OptimizerParams& p, float lr, int64_t t, std::vector<float>& w, const std::vector<float>& g,
                   const std::vector<DecaySegment>& segments, std::vector<float>& m, std::vector<float>& v) {
  const float b1 = static_cast<float>(p.beta1), b2 = static_cast<float>(p.beta2), eps = static_cast<float>(p.eps);
  const float c1 = 1.0f / static_cast<float>(1.0 - std::pow(p.beta1, static_cast<double>(t)));
  const float c2 = 1.0f / static_cast<float>(1.0 - std::pow(p.beta2, static_cast<double>(t)));
  for (const auto& seg : segments) {
    const float wd = seg.decay ? static_cast<float>(p.weight_decay) : 0.0f;
    for (size_t i = seg.begin; i < seg.end; ++i) {
      float gi = g[i];
      if (p.kind == OptimizerKind::kAdamW) {
        w[i] -= lr * wd * w[i];
      } else {
        gi += wd * w[i];
      }
      m[i] = b1 * m[i] + (1.0f - b1) * gi;
      v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
      w[i] -= lr * (m[i] * c1) / (std::sqrt(v[i] * c2) + eps);
    }
  }
}

TEST_CASE("Adam and AdamW give the element-by-element update's bits on this CPU's SIMD clone, on 1 and 2 threads") {
  // Past two chunks of the threaded update, odd lengths, a decayed and an undecayed segment.
  const size_t n = 300'001;
  const std::vector<DecaySegment> segments = {{0, 200'003, true}, {200'003, n, false}};
  std::mt19937 rng(29);
  std::normal_distribution<float> dist;
  std::vector<float> w0(n), g(n);
  for (size_t i = 0; i < n; ++i) w0[i] = dist(rng), g[i] = 0.01f * dist(rng);
  const int threads_before = omp_get_max_threads();
  for (OptimizerKind kind : {OptimizerKind::kAdamW, OptimizerKind::kAdam}) {
    for (int threads : {1, 2}) {
      CAPTURE(static_cast<int>(kind));
      CAPTURE(threads);
      omp_set_num_threads(threads);
      const OptimizerParams p{kind, 3e-4, 0.9, 0.95, 1e-8, 0.1, 0.0};
      std::vector<float> w = w0, rw = w0, m(n, 0.0f), v(n, 0.0f), rm(n, 0.0f), rv(n, 0.0f);
      for (int64_t t = 1; t <= 3; ++t) {
        OptimizerUpdate(p, 3e-4, t, w, g, segments, m, v);
        ReferenceAdam(p, 3e-4f, t, rw, g, segments, rm, rv);
      }
      CHECK(std::memcmp(w.data(), rw.data(), n * sizeof(float)) == 0);
      CHECK(std::memcmp(m.data(), rm.data(), n * sizeof(float)) == 0);
      CHECK(std::memcmp(v.data(), rv.data(), n * sizeof(float)) == 0);
    }
  }
  omp_set_num_threads(threads_before);
}

TEST_CASE("AdamW's first steps match the formula computed by hand") {
  OptimizerParams p{OptimizerKind::kAdamW, 0.1, 0.9, 0.999, 1e-8, 0.5, 0.0};
  std::vector<float> w = {1.0f, -2.0f}, g = {0.5f, 0.5f};
  auto state = OptimizerState::For(p, 2);
  // Element 0 decays, element 1 does not.
  std::vector<DecaySegment> segs = {{0, 1, true}, {1, 2, false}};
  OptimizerStep(p, 0.1, w, g, segs, state);
  // Step 1: m = 0.05, v = 0.00025, mhat = 0.5, vhat = 0.25 -> update 0.5/0.5 = 1 (eps negligible).
  // w0 = 1 - 0.1*0.5*1 = 0.95, then 0.95 - 0.1*1 = 0.85; w1 = -2 - 0.1 = -2.1.
  CHECK(w[0] == doctest::Approx(0.85));
  CHECK(w[1] == doctest::Approx(-2.1));
  CHECK(state.step == 1);
  CHECK(state.bytes() == 16);
  OptimizerStep(p, 0.1, w, g, segs, state);
  // Step 2, same gradient: mhat = 0.5, vhat = 0.25 again -> update 1.
  CHECK(w[0] == doctest::Approx(0.85 - 0.1 * 0.5 * 0.85 - 0.1));
  CHECK(w[1] == doctest::Approx(-2.2));
}

TEST_CASE("Adam folds weight decay into the gradient (L2), AdamW does not") {
  OptimizerParams adam{OptimizerKind::kAdam, 0.1, 0.9, 0.999, 1e-8, 1.0, 0.0};
  std::vector<float> w = {2.0f}, g = {0.0f};
  auto state = OptimizerState::For(adam, 1);
  OptimizerStep(adam, 0.1, w, g, {{0, 1, true}}, state);
  // g' = 0 + 1*2 = 2: mhat = 2, vhat = 4 -> update 1.
  CHECK(w[0] == doctest::Approx(1.9));
}

TEST_CASE("SGD with momentum starts the buffer at the first gradient") {
  OptimizerParams sgd{OptimizerKind::kSgd, 0.1, 0, 0, 0, 0.0, 0.9};
  std::vector<float> w = {1.0f}, g = {1.0f};
  auto state = OptimizerState::For(sgd, 1);
  CHECK(state.bytes() == 4);
  OptimizerStep(sgd, 0.1, w, g, {{0, 1, true}}, state);
  CHECK(w[0] == doctest::Approx(0.9));
  OptimizerStep(sgd, 0.1, w, g, {{0, 1, true}}, state);
  CHECK(w[0] == doctest::Approx(0.9 - 0.1 * 1.9));
  OptimizerParams plain{OptimizerKind::kSgd, 0.1, 0, 0, 0, 0.0, 0.0};
  CHECK(OptimizerState::For(plain, 10).bytes() == 0);
}

TEST_CASE("SGD dampening scales the gradient into the buffer after the first step") {
  OptimizerParams sgd{OptimizerKind::kSgd, 0.1, 0, 0, 0, 0.0, 0.9, /*dampening=*/0.5};
  std::vector<float> w = {1.0f}, g = {1.0f};
  auto state = OptimizerState::For(sgd, 1);
  OptimizerStep(sgd, 0.1, w, g, {{0, 1, true}}, state);
  CHECK(w[0] == doctest::Approx(0.9));  // buf = g = 1 at the first step (torch.optim.SGD)
  OptimizerStep(sgd, 0.1, w, g, {{0, 1, true}}, state);
  // buf = 0.9 * 1 + (1 - 0.5) * 1 = 1.4.
  CHECK(state.m[0] == doctest::Approx(1.4));
  CHECK(w[0] == doctest::Approx(0.9 - 0.1 * 1.4));
}

TEST_CASE("SGD with nesterov steps along the gradient plus momentum times the buffer") {
  OptimizerParams sgd{OptimizerKind::kSgd, 0.1, 0, 0, 0, 0.0, 0.9, 0.0, /*nesterov=*/true};
  std::vector<float> w = {1.0f}, g = {1.0f};
  auto state = OptimizerState::For(sgd, 1);
  OptimizerStep(sgd, 0.1, w, g, {{0, 1, true}}, state);
  // buf = 1; step = g + 0.9 buf = 1.9.
  CHECK(w[0] == doctest::Approx(1.0 - 0.19));
  OptimizerStep(sgd, 0.1, w, g, {{0, 1, true}}, state);
  // buf = 0.9 + 1 = 1.9; step = 1 + 0.9 * 1.9 = 2.71.
  CHECK(w[0] == doctest::Approx(0.81 - 0.271));
}

TEST_CASE("Adam without bias_correction divides by neither 1 - b1^t nor 1 - b2^t") {
  OptimizerParams adam{OptimizerKind::kAdamW, 0.1, 0.9, 0.999, 0.0, 0.0, 0.0};
  adam.bias_correction = false;
  std::vector<float> w = {1.0f}, g = {0.5f};
  auto state = OptimizerState::For(adam, 1);
  OptimizerStep(adam, 0.1, w, g, {{0, 1, true}}, state);
  // m = 0.05, v = 0.00025: update = 0.05 / sqrt(0.00025) = 3.16227766 (10x the corrected 1 / 1).
  CHECK(w[0] == doctest::Approx(1.0 - 0.1 * 0.05 / std::sqrt(0.00025)));
}

TEST_CASE("ValidateOptimizerParams names the offending train.json key") {
  struct Case {
    OptimizerParams params;
    const char* message;
  };
  OptimizerParams nesterov_without_momentum{OptimizerKind::kSgd};
  nesterov_without_momentum.nesterov = true;
  OptimizerParams nesterov_damped{OptimizerKind::kSgd};
  nesterov_damped.nesterov = true;
  nesterov_damped.momentum = 0.9;
  nesterov_damped.dampening = 0.1;
  const std::vector<Case> cases = {
      {{OptimizerKind::kAdamW, -1.0}, "optimizer.params.lr: must be a finite number >= 0"},
      {{OptimizerKind::kAdam, 0.1, 1.5}, "optimizer.params.betas: must both be in [0, 1]"},
      {{OptimizerKind::kAdamW, 0.1, 0.9, 0.999, -1.0}, "optimizer.params.eps: must be a finite number >= 0"},
      {{OptimizerKind::kSgd, 0.1, 0, 0, 0, NAN}, "optimizer.params.weight_decay: must be a finite number >= 0"},
      {{OptimizerKind::kSgd, 0.1, 0, 0, 0, 0, -0.5}, "optimizer.params.momentum: must be a finite number >= 0"},
      {nesterov_without_momentum, "optimizer.params.nesterov: requires momentum > 0 and dampening 0"},
      {nesterov_damped, "optimizer.params.nesterov: requires momentum > 0 and dampening 0"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.message);
    const Status status = ValidateOptimizerParams(c.params);
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK(status.message() == c.message);
  }
  CHECK(ValidateOptimizerParams(OptimizerParams{}).ok());
  CHECK(ValidateOptimizerParams(OptimizerParams{OptimizerKind::kSgd, 0.1, 0, 0, 0, 0, 0.9, 0, true}).ok());
}

}  // namespace
}  // namespace dslaunch::runtime
