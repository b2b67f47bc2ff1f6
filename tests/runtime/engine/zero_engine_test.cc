// The engine on its own, driven like a model drives it, with the in-process communicator: an fp16
// overflow on one rank skips the step on all ranks; per-rank memory follows the ZeRO formulas.
#include "runtime/engine/engine.h"

#include <doctest/doctest.h>

#include <cmath>

#include "runtime/models/gpt.h"
#include "tests/fakes/engine_on_threads.h"

namespace dslaunch::runtime {
namespace {

using testing::OddLayout;

// One micro-step as a model makes it: every group acquired and released in order, then the
// gradients written from the last group to the first, each reported ready.
void MicroStep(Engine& engine, const ParameterLayout& layout, float value, int poisoned_group = -1) {
  ParameterAccess& access = engine.access();
  const int groups = static_cast<int>(layout.groups().size());
  for (int g = 0; g < groups; ++g) {
    (void)access.Acquire(g);
    access.Release(g);
  }
  for (int g = groups - 1; g >= 0; --g) {
    std::span<const float> p = access.Acquire(g);
    std::span<float> grad = access.Gradient(g);
    for (size_t i = 0; i < grad.size(); ++i) grad[i] += value * (p[i] + 0.01f * static_cast<float>(i));
    if (g == poisoned_group) grad[0] = 1e6f;  // x scale 2^16: past fp16's 65504
    access.Release(g);
    access.GradientReady(g);
  }
}

TEST_CASE("An fp16 overflow on one rank skips the step on every rank and leaves the parameters unchanged") {
  const ParameterLayout layout = OddLayout();
  std::vector<float> initial(layout.numel());
  for (size_t i = 0; i < initial.size(); ++i) initial[i] = 0.05f * static_cast<float>(i % 11) - 0.2f;
  for (int stage : {0, 1, 2, 3}) {
    CAPTURE(stage);
    EngineOptions o;
    o.zero.stage = stage;
    o.zero.reduce_bucket_size = 16;
    o.zero.stage3_prefetch_bucket_size = 16;
    o.zero.stage3_param_persistence_threshold = 5;  // group "c" stays whole
    o.precision = Precision::kFp16;
    o.loss_scaler.hysteresis = 1;
    o.optimizer.lr = 0.1;
    testing::OnEveryRank(3, layout, o, initial, [&](int rank, Engine& engine) {
      std::vector<float> before(layout.numel()), after(layout.numel());
      REQUIRE(engine.GatherParameters(before).ok());
      CHECK(engine.loss_scale() == 65536.0);
      engine.BeginStep(1);
      MicroStep(engine, layout, static_cast<float>(engine.loss_scale()), rank == 1 ? 1 : -1);
      auto stats = engine.Step();
      REQUIRE(stats.ok());
      CHECK(stats->skipped);
      CHECK(stats->scale_event == "overflow: skipping step; loss scale 65536 -> 32768");
      CHECK(engine.loss_scale() == 32768.0);
      CHECK(engine.applied_steps() == 0);
      REQUIRE(engine.GatherParameters(after).ok());
      CHECK(after == before);
      // A clean step applies, and every rank ends with the same parameters.
      engine.BeginStep(1);
      MicroStep(engine, layout, static_cast<float>(engine.loss_scale()));
      stats = engine.Step();
      REQUIRE(stats.ok());
      CHECK_FALSE(stats->skipped);
      CHECK(engine.applied_steps() == 1);
      REQUIRE(engine.GatherParameters(after).ok());
      CHECK(after != before);
    });
  }
}

// Per-rank bytes with 16-bit storage and Adam: the ZeRO paper's 2Ψ parameters, 2Ψ gradients and
// K = 12 bytes of optimizer state (fp32 master weights, momentum, variance) per parameter.
TEST_CASE("Per-rank memory with 16-bit storage and Adam follows the ZeRO formulas at every stage") {
  GptModel model(GptConfig{2, 2, 16, 8, 32}, 1);
  const double psi = static_cast<double>(model.layout().numel());
  std::vector<float> initial(model.layout().numel(), 0.01f);
  for (Precision precision : {Precision::kFp16, Precision::kBf16}) {
    for (int stage : {0, 1, 2, 3}) {
      for (int world : {1, 2, 4}) {
        CAPTURE(stage);
        CAPTURE(world);
        EngineOptions o;
        o.zero.stage = stage;
        o.zero.stage3_param_persistence_threshold = 0;
        o.precision = precision;
        const double n = world;
        const double expected = stage == 0   ? 16 * psi
                                : stage == 1 ? 4 * psi + 12 * psi / n
                                : stage == 2 ? 2 * psi + 14 * psi / n
                                             : 16 * psi / n;
        testing::OnEveryRank(world, model.layout(), o, initial, [&](int, Engine& engine) {
          const MemoryStats m = engine.memory();
          const double total = static_cast<double>(m.parameters + m.gradients + m.optimizer_state);
          // Partitions differ by at most one element between ranks: 16 bytes of slack each way.
          CHECK(std::abs(total - expected) <= 16.0 * 3);
        });
      }
    }
  }
}

}  // namespace
}  // namespace dslaunch::runtime
