// GptCuda's order of operations against GptModel, without a GPU: gpt.cc linked with the host
// stand-in of the CUDA runtime and ops (tests/fakes/host_cuda.cc), where every op is the CPU op
// itself. Any difference is then GptCuda's own (a step left out, a wrong buffer, offset or scale,
// a buffer read before written), not the kernels': the loss and every gradient must match bit for
// bit (fp32 adds the embedding op's gradient straight into the tied token embedding's, after the
// head's term, as GptModel does).
#include "runtime/models/cuda/gpt.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/core/random.h"
#include "runtime/models/gpt.h"
#include "tests/fakes/flat_parameter_access.h"

namespace dslaunch::runtime {
namespace {

namespace cu = ops::cuda;

constexpr uint64_t kInitSeed = 20240611;

GptConfig SmallConfig() {
  GptConfig config;
  config.n_layer = 2;
  config.n_head = 4;
  config.n_embd = 64;
  config.block_size = 32;
  config.vocab_size = 96;
  return config;
}

struct Run {
  float loss = 0;
  std::vector<float> grads;
};

std::vector<int> RandomTokens(int count, int vocab, uint64_t& state) {
  std::vector<int> tokens(count);
  for (int& x : tokens) x = static_cast<int>(SplitMix64(state) % vocab);
  return tokens;
}

void CheckSame(const Run& cpu, const Run& host) {
  CHECK(std::memcmp(&cpu.loss, &host.loss, sizeof(float)) == 0);
  CAPTURE(cpu.loss);
  CAPTURE(host.loss);
  size_t differing = 0;
  for (size_t i = 0; i < cpu.grads.size(); ++i) differing += std::memcmp(&cpu.grads[i], &host.grads[i], sizeof(float)) != 0;
  CHECK(differing == 0);
  // The comparison means something only if the gradients are there.
  size_t nonzero = 0;
  for (float g : cpu.grads) nonzero += g != 0.0f;
  CHECK(nonzero > cpu.grads.size() / 2);
}

TEST_CASE("GptCuda's forward and backward, run on the CPU ops, are GptModel's to the bit") {
  const GptConfig config = SmallConfig();
  GptModel shape(config, 4);
  std::vector<float> params(shape.layout().numel());
  shape.InitParameters(params, kInitSeed);
  auto ctx = cu::CublasLtContext::Create();
  REQUIRE(ctx.ok());
  auto model = GptCuda<float>::Create(config, 4, *ctx);
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());

  uint64_t state = 7;
  // Two shapes in a row on one model: an uneven one, then the full one with a loss scale, so that
  // buffers sized for the first are not what the second reads.
  for (auto [b, t, scale] : {std::tuple{3, 29, 1.0f}, {4, 32, 0.5f}}) {
    CAPTURE(b);
    CAPTURE(t);
    const std::vector<int> tokens = RandomTokens(b * t, config.vocab_size, state);
    const std::vector<int> targets = RandomTokens(b * t, config.vocab_size, state);

    Run cpu{0, std::vector<float>(params.size(), 0.0f)};
    GptModel reference(config, b);
    dslaunch::testing::FlatParameterAccess access(reference.layout(), params, cpu.grads);
    cpu.loss = reference.Forward(access, tokens.data(), targets.data(), b, t);
    reference.Backward(access, scale);

    Run host{0, std::vector<float>(params.size(), 0.0f)};
    FlatDeviceParameters<float> flat((*model)->layout(), params.data(), host.grads.data());
    REQUIRE((*model)->Forward(flat, tokens.data(), targets.data(), b, t, nullptr).ok());
    auto loss = (*model)->MeanLoss(nullptr);
    REQUIRE(loss.ok());
    host.loss = *loss;
    REQUIRE((*model)->Backward(flat, scale, nullptr).ok());
    CheckSame(cpu, host);
  }
}

TEST_CASE("GptCuda refuses a backward before any forward and a batch past its size") {
  auto ctx = cu::CublasLtContext::Create();
  REQUIRE(ctx.ok());
  auto model = GptCuda<float>::Create(SmallConfig(), 2, *ctx);
  REQUIRE(model.ok());
  std::vector<float> params((*model)->layout().numel()), grads(params.size());
  FlatDeviceParameters<float> flat((*model)->layout(), params.data(), grads.data());
  CHECK((*model)->Backward(flat, 1.0f, nullptr).code() == StatusCode::kFailedPrecondition);
  std::vector<int> tokens(3 * 8);
  CHECK((*model)->Forward(flat, tokens.data(), tokens.data(), 3, 8, nullptr).code() ==
        StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dslaunch::runtime
