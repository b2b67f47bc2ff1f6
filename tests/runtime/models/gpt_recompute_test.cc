// Activation checkpointing in the gpt model (docs/engine.md, "Recomputation"): recomputing blocks
// in backward gives bitwise the same losses and gradients as keeping their activations, with
// parameters as fp32 and as the 16-bit values the engine hands the model; the activation memory
// falls to the block inputs plus one block's internals, in the model's buffers and its formula.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "runtime/core/sixteen_bit_float.h"
#include "runtime/models/gpt.h"
#include "tests/fakes/flat_parameter_access.h"

namespace dslaunch::runtime {
namespace {

constexpr int kLayers = 3;

GptConfig Small(int recompute_blocks) {
  GptConfig c{kLayers, 2, 16, 8, 29};
  c.recompute_blocks = recompute_blocks;
  return c;
}

enum class Storage { kFp32, kFp16, kBf16 };

// What the model reads with 16-bit storage: each parameter rounded to that type (the engine's
// Acquire converts the stored 16-bit values back to fp32).
void RoundTo(Storage storage, std::vector<float>& params) {
  for (float& p : params) {
    if (storage == Storage::kFp16) p = HalfToFloat(FloatToHalf(p));
    if (storage == Storage::kBf16) p = BFloat16ToFloat(FloatToBFloat16(p));
  }
}

struct Trace {
  std::vector<float> losses;
  std::vector<std::vector<float>> gradients;  // per step
  std::vector<std::string> calls;             // Acquire/Release order, all steps
};

// `steps` SGD steps of 2 micro-steps each (the second on other tokens, a shorter sequence and a
// smaller batch than the model's maximum), loss scale 8, from the same initialisation.
Trace Run(int recompute_blocks, Storage storage, int steps) {
  GptModel model(Small(recompute_blocks), 3);
  std::vector<float> params(model.layout().numel());
  model.InitParameters(params, 7);
  for (float& p : params) p *= 3.0f;  // larger than GPT-2's init, so every path carries signal
  Trace trace;
  for (int step = 0; step < steps; ++step) {
    RoundTo(storage, params);
    std::vector<float> grads(params.size(), 0.0f);
    testing::FlatParameterAccess access(model.layout(), params, grads);
    std::vector<int> tokens(3 * 8), targets(3 * 8);
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = static_cast<int>((i * 7 + step * 3) % 29);
      targets[i] = static_cast<int>((i * 5 + 1 + step) % 29);
    }
    trace.losses.push_back(model.Forward(access, tokens.data(), targets.data(), 3, 8));
    model.Backward(access, 8.0f);
    trace.losses.push_back(model.Forward(access, targets.data(), tokens.data(), 2, 6));
    model.Backward(access, 8.0f);
    trace.calls.insert(trace.calls.end(), access.calls().begin(), access.calls().end());
    for (size_t i = 0; i < params.size(); ++i) params[i] -= 0.05f * grads[i] / 8.0f;
    trace.gradients.push_back(std::move(grads));
  }
  return trace;
}

// Exact equality of every element, bit for bit (also tells -0 from +0 and equal NaNs apart).
bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_CASE("Recomputing blocks in backward gives bitwise the losses and gradients of keeping their activations") {
  for (Storage storage : {Storage::kFp32, Storage::kFp16, Storage::kBf16}) {
    CAPTURE(static_cast<int>(storage));
    const Trace kept = Run(0, storage, 3);
    for (int recompute = 1; recompute <= kLayers; ++recompute) {
      CAPTURE(recompute);
      const Trace recomputed = Run(recompute, storage, 3);
      CHECK(BitwiseEqual(recomputed.losses, kept.losses));
      REQUIRE(recomputed.gradients.size() == kept.gradients.size());
      for (size_t step = 0; step < kept.gradients.size(); ++step) {
        CAPTURE(step);
        size_t differing = 0;
        for (size_t i = 0; i < kept.gradients[step].size(); ++i) {
          differing += std::memcmp(&kept.gradients[step][i], &recomputed.gradients[step][i], sizeof(float)) != 0;
        }
        CHECK(differing == 0);
      }
      // The recomputation uses the group its backward acquires anyway: no extra gathers at stage 3.
      CHECK(recomputed.calls == kept.calls);
    }
  }
}

TEST_CASE("A run that learns: the gradient is not zero, so the equality above compares something") {
  const Trace kept = Run(0, Storage::kFp32, 1);
  size_t nonzero = 0;
  for (float g : kept.gradients[0]) nonzero += g != 0.0f;
  CHECK(nonzero > kept.gradients[0].size() * 9 / 10);
}

TEST_CASE("Recomputation keeps the block inputs and one block's internals, in the buffers and in the formula") {
  const int batch = 3;
  const double n = batch * 8.0, c = 16, nh = 2, t = 8;
  // Internals of one block, fp32: ln1, qkv (3), atty, res2, ln2, fch and its GELU (4 each) = 15 nc,
  // two means and two rstds per row, and the attention probabilities b x nh x t x t.
  const double block_internals = (15 * n * c + 4 * n + batch * nh * t * t) * sizeof(float);
  const double kept = GptModel::ActivationBytes(Small(0), batch);
  for (int recompute = 0; recompute <= kLayers; ++recompute) {
    CAPTURE(recompute);
    const GptConfig config = Small(recompute);
    GptModel model(config, batch);
    CHECK(static_cast<double>(model.activation_bytes()) == GptModel::ActivationBytes(config, batch));
    CHECK(GptModel::BlockSlots(config) == (recompute == 0 ? kLayers : kLayers - recompute + 1));
    const double saved = recompute == 0 ? 0.0 : (recompute - 1) * block_internals;
    CHECK(GptModel::ActivationBytes(config, batch) == kept - saved);
  }
}

}  // namespace
}  // namespace dslaunch::runtime
