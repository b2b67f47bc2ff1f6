#include "runtime/engine/optimizer.h"

#include <doctest/doctest.h>

#include <cmath>

namespace dslaunch::runtime {
namespace {

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

}  // namespace
}  // namespace dslaunch::runtime
