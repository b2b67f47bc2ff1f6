// AdamUpdate of runtime/ops/cuda/ops.h against OptimizerUpdate (runtime/engine/optimizer.h) over
// several steps, with and without weight decay, grad scale and a 16-bit copy.
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "runtime/core/sixteen_bit_float.h"
#include "runtime/engine/optimizer.h"
#include "runtime/ops/cuda/ops.h"
#include "tests/runtime/ops/cuda/ops_test_support.h"

namespace dslaunch::runtime::ops::cuda::testing {
namespace {

// The kernel does the CPU's fp32 operations in the CPU's order with explicitly rounded intrinsics
// (no fused multiply-add), the bias corrections computed on the host the same way: the results
// should be bit-identical. The tolerance allows a few ulps (2^-23 ~ 1.2e-7 relative) in case a
// libm sqrt or a compiler differs, which still tells a wrong formula (bias correction, decay
// order, beta) apart by orders of magnitude.
constexpr Tolerance kAdamTolerance{1e-7, 5e-7};
// Elements per buffer: not a multiple of the block size.
constexpr long kCount = 1000 + 13;
constexpr int kSteps = 3;

struct Case {
  OptimizerKind kind;
  bool bias_correction;
  float grad_scale;
  DType copy_dtype;
  bool with_copy;
};

void CheckAdam(const Case& k, uint64_t seed) {
  INFO("kind=" << (k.kind == OptimizerKind::kAdamW ? "AdamW" : "Adam") << " bias_correction=" << k.bias_correction
               << " grad_scale=" << k.grad_scale << " copy=" << k.with_copy);
  OptimizerParams p;
  p.kind = k.kind;
  p.lr = 1e-2;
  p.beta1 = 0.9;
  p.beta2 = 0.95;
  p.eps = 1e-8;
  p.weight_decay = 0.1;
  p.bias_correction = k.bias_correction;
  uint64_t s = seed;
  // Two segments as the engine has them: weights (decayed) then biases (not).
  const size_t split = 600;
  const std::vector<DecaySegment> segments = {{0, split, true}, {split, static_cast<size_t>(kCount), false}};
  std::vector<float> params = Random(kCount, s, 1.0f), m(kCount, 0.0f), v(kCount, 0.0f);

  TestStream stream;
  DeviceBuffer d_params(DType::kFloat32, params), d_m(DType::kFloat32, m), d_v(DType::kFloat32, v);
  DeviceBuffer d_grads(DType::kFloat32, static_cast<size_t>(kCount));
  DeviceBuffer d_copy(k.copy_dtype, NaNs(kCount));
  for (int step = 1; step <= kSteps; ++step) {
    CAPTURE(step);
    const std::vector<float> grads = Random(kCount, s, 0.1f);
    // The CPU reference sees the gradients already scaled: one fp32 multiply, as the kernel does.
    std::vector<float> scaled = grads;
    for (float& g : scaled) g *= k.grad_scale;
    OptimizerUpdate(p, p.lr, step, params, scaled, segments, m, v);

    d_grads.Upload(grads);
    AdamParams hyper;
    hyper.decoupled = k.kind == OptimizerKind::kAdamW;
    hyper.lr = p.lr;
    hyper.beta1 = p.beta1;
    hyper.beta2 = p.beta2;
    hyper.eps = p.eps;
    hyper.weight_decay = p.weight_decay;
    hyper.bias_correction = p.bias_correction;
    hyper.step = step;
    hyper.grad_scale = k.grad_scale;
    for (const DecaySegment& seg : segments) {
      const long n = static_cast<long>(seg.end - seg.begin);
      void* copy = k.with_copy ? static_cast<char*>(d_copy.get()) + seg.begin * DTypeSize(k.copy_dtype) : nullptr;
      DSLAUNCH_REQUIRE_OK(AdamUpdate(hyper, d_params.as<float>() + seg.begin, d_grads.as<float>() + seg.begin,
                                     d_m.as<float>() + seg.begin, d_v.as<float>() + seg.begin, n, seg.decay, copy,
                                     k.copy_dtype, stream.get()));
    }
    stream.Finish();
    const std::vector<float> got = d_params.Download();
    ExpectClose(got, params, kAdamTolerance, "params");
    ExpectClose(d_m.Download(), m, kAdamTolerance, "m");
    ExpectClose(d_v.Download(), v, kAdamTolerance, "v");
    if (k.with_copy) {
      // The copy is the GPU's new params rounded to 16 bits: exactly the CPU's rounding of them.
      const std::vector<uint16_t> bits = d_copy.DownloadBits16();
      size_t mismatches = 0;
      for (size_t i = 0; i < bits.size(); ++i) {
        const uint16_t want =
            k.copy_dtype == DType::kBFloat16 ? FloatToBFloat16(got[i]).bits : FloatToHalf(got[i]).bits;
        if (bits[i] != want) ++mismatches;
      }
      CHECK_MESSAGE(mismatches == 0, mismatches << " copy elements differ from the CPU's rounding");
    }
  }
}

TEST_CASE("AdamUpdate matches OptimizerUpdate for AdamW over several steps") {
  DSLAUNCH_REQUIRE_GPU();
  CheckAdam({OptimizerKind::kAdamW, true, 1.0f, DType::kBFloat16, false}, 1);
}

TEST_CASE("AdamUpdate matches OptimizerUpdate for Adam with L2 decay") {
  DSLAUNCH_REQUIRE_GPU();
  CheckAdam({OptimizerKind::kAdam, true, 1.0f, DType::kBFloat16, false}, 2);
}

TEST_CASE("AdamUpdate matches OptimizerUpdate without bias correction") {
  DSLAUNCH_REQUIRE_GPU();
  CheckAdam({OptimizerKind::kAdamW, false, 1.0f, DType::kBFloat16, false}, 3);
}

TEST_CASE("AdamUpdate folds in the grad scale and writes a bf16 copy") {
  DSLAUNCH_REQUIRE_GPU();
  // 1/loss_scale (2^-10) times a clip coefficient.
  CheckAdam({OptimizerKind::kAdamW, true, 0.7f / 1024.0f, DType::kBFloat16, true}, 4);
}

TEST_CASE("AdamUpdate writes an fp16 copy") {
  DSLAUNCH_REQUIRE_GPU();
  CheckAdam({OptimizerKind::kAdamW, true, 1.0f, DType::kFloat16, true}, 5);
}

TEST_CASE("AdamUpdate rejects a step number below 1") {
  DSLAUNCH_REQUIRE_GPU();
  AdamParams hyper;
  hyper.step = 0;
  float dummy = 0.0f;
  const Status status = AdamUpdate(hyper, &dummy, &dummy, &dummy, &dummy, 1, true, nullptr, DType::kFloat32, nullptr);
  CHECK(status.code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dslaunch::runtime::ops::cuda::testing
