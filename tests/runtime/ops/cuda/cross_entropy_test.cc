// CrossEntropyForward / CrossEntropyBackward of runtime/ops/cuda/ops.h against runtime/ops/cpu/'s.
#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/ops/cpu/ops.h"
#include "runtime/ops/cuda/ops.h"
#include "tests/runtime/ops/cuda/ops_test_support.h"

namespace dslaunch::runtime::ops::cuda::testing {
namespace {

// fp32 probabilities: expf against SimdExp (2 ulp) and sums in another order: ~1e-6 relative.
// A wrong max, sum or index is O(1).
constexpr Tolerance kF32Tolerance{1e-5, 1e-5};
// bf16 / fp16 probabilities and gradients: one rounding to T (at most 2^-8 / 2^-11 relative:
// 2.5x / 4x inside the tolerance).
constexpr Tolerance kBF16Tolerance{1e-2, 1e-2};
constexpr Tolerance kF16Tolerance{2e-3, 2e-3};
// The losses are fp32 on both sides from the same logits (the GPU takes log of the fp32
// probability, before rounding to T): ~1e-6 relative, whatever T is.
constexpr Tolerance kLossTolerance{1e-5, 1e-5};

template <typename T>
void CheckCrossEntropy(int n, int v, uint64_t seed) {
  const DType dt = kDTypeOf<T>;
  const Tolerance tol = ToleranceFor<T>(kF32Tolerance, kBF16Tolerance, kF16Tolerance);
  INFO("n=" << n << " v=" << v);
  uint64_t s = seed;
  const size_t nz = static_cast<size_t>(n) * v;
  // Logits in [-4, 4): probabilities spread over about e^8 ~ 3000x.
  const std::vector<float> logits = Random(nz, s, 4.0f, dt);
  std::vector<int> targets(n);
  for (int& tg : targets) tg = static_cast<int>(SplitMix64(s) % static_cast<uint64_t>(v));
  targets[0] = v - 1;  // the last column, where a partial block ends

  std::vector<float> losses(n), probs(nz);
  ops::CrossEntropyForward(losses.data(), probs.data(), logits.data(), targets.data(), n, v);

  // The backward's input is the CPU's probabilities rounded to T (the op is checked on its own).
  std::vector<float> probs_t = probs;
  for (float& p : probs_t) p = RoundTo(dt, p);
  // dloss 1 and start values of the increments' size (|p - onehot| ~ 1/v .. 1), so that a lost
  // accumulation shows.
  const float dloss = 1.0f;
  const std::vector<float> dz0 = Random(nz, s, 1.0f / static_cast<float>(v), dt);
  std::vector<float> dz = dz0;
  ops::CrossEntropyBackward(dz.data(), probs_t.data(), targets.data(), dloss, n, v);

  TestStream stream;
  DeviceInts d_targets(targets);
  DeviceBuffer d_logits(dt, logits), d_probs(dt, NaNs(nz)), d_losses(DType::kFloat32, NaNs(n));
  DeviceBuffer d_probs_t(dt, probs_t), d_dz(dt, dz0);
  DSLAUNCH_REQUIRE_OK(CrossEntropyForward<T>(d_losses.as<float>(), d_probs.as<T>(), d_logits.as<T>(), d_targets.get(),
                                             n, v, stream.get()));
  DSLAUNCH_REQUIRE_OK(CrossEntropyBackward<T>(d_dz.as<T>(), d_probs_t.as<T>(), d_targets.get(), dloss, n, v,
                                              stream.get()));
  stream.Finish();
  ExpectClose(d_losses.Download(), losses, kLossTolerance, "losses");
  ExpectClose(d_probs.Download(), probs, tol, "probs");
  ExpectClose(d_dz.Download(), dz, tol, "dlogits");
}

template <typename T>
void CrossEntropyMatchesCpu() {
  CheckCrossEntropy<T>(9, 1003, 1);  // V over the block's 512 threads, not a multiple
  CheckCrossEntropy<T>(5, 7, 2);     // V below a warp
}

DSLAUNCH_OPS_CASES("CrossEntropyForward and CrossEntropyBackward match the CPU op and accumulate",
                   CrossEntropyMatchesCpu)

TEST_CASE("CrossEntropyForward matches the CPU op at GPT-2's padded vocabulary in fp32") {
  DSLAUNCH_REQUIRE_GPU();
  CheckCrossEntropy<float>(4, 50304, 3);
}

TEST_CASE("CrossEntropyForward gives a NaN loss for a target outside the vocabulary") {
  DSLAUNCH_REQUIRE_GPU();
  const int n = 2, v = 3;
  const std::vector<int> targets = {1, v};
  TestStream stream;
  DeviceInts d_targets(targets);
  DeviceBuffer d_logits(DType::kFloat32, std::vector<float>(n * v, 0.0f)), d_probs(DType::kFloat32, n * v),
      d_losses(DType::kFloat32, n);
  DSLAUNCH_REQUIRE_OK(CrossEntropyForward<float>(d_losses.as<float>(), d_probs.as<float>(), d_logits.as<float>(),
                                                 d_targets.get(), n, v, stream.get()));
  stream.Finish();
  const std::vector<float> losses = d_losses.Download();
  CHECK(losses[0] == doctest::Approx(std::log(3.0)).epsilon(1e-6));
  CHECK(std::isnan(losses[1]));
}

}  // namespace
}  // namespace dslaunch::runtime::ops::cuda::testing
