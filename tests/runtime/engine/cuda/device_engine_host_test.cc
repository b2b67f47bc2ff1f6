// The device engine against ZeroEngine, without a GPU: device_engine.cc and the device GPT
// (runtime/models/cuda/gpt.cc) linked with the host stand-in of the CUDA runtime and ops
// (tests/fakes/host_cuda.cc: every op its CPU twin) and of NCCL (tests/fakes/host_collectives.h: a
// thread communicator), on 1-3 ranks. Any difference is then the engine's own (a stage that reduces
// the wrong range, a rounding in the wrong place, a step that skips or clips otherwise, state
// saved from the wrong slice): the losses, the norms and every byte of the state a checkpoint
// saves must be ZeroEngine's with GptModel, for every ZeRO stage and precision.
#include "runtime/engine/cuda/device_engine.h"

#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/core/random.h"
#include "runtime/engine/engine.h"
#include "runtime/models/cuda/gpt.h"
#include "runtime/models/gpt.h"
#include "tests/fakes/host_collectives.h"
#include "tests/fakes/thread_communicator.h"

namespace dslaunch::runtime {
namespace {

constexpr uint64_t kInitSeed = 31337;
constexpr int kBatch = 2;
constexpr int kSeq = 8;

GptConfig TinyConfig() {
  GptConfig config;
  config.n_layer = 2;
  config.n_head = 2;
  config.n_embd = 16;
  config.block_size = kSeq;
  config.vocab_size = 40;
  return config;
}

EngineOptions OptionsFor(int stage, Precision precision) {
  EngineOptions options;
  options.zero.stage = stage;
  options.zero.reduce_bucket_size = 700;  // runs of several groups, cut inside others
  options.zero.stage3_param_persistence_threshold = 300;  // the CPU keeps the small groups whole
  options.precision = precision;
  options.loss_scaler.initial_scale_power = 20;  // fp16: the first steps overflow and are skipped
  options.loss_scaler.hysteresis = 1;
  options.optimizer.kind = OptimizerKind::kAdamW;
  options.optimizer.lr = 3e-2;
  options.optimizer.weight_decay = 0.1;
  options.gradient_clipping = 0.5;  // clips on most steps
  return options;
}

// What a run leaves on one rank: per step the loss of each micro-step and the norm, then the saved
// state (its range and every tensor) and the counters.
struct RankRun {
  std::vector<float> losses;
  std::vector<double> norms;
  std::vector<int> skipped;
  ShardRange range;
  std::vector<std::vector<float>> state;
  int64_t optimizer_step = 0;
};

// This rank's micro-batch of a step: tokens and targets from the rank, step and micro-step.
void FillBatch(int rank, int step, int micro, std::vector<int>& tokens, std::vector<int>& targets) {
  uint64_t state = 1000003ULL * rank + 7919ULL * step + 104729ULL * micro + 1;
  for (int& t : tokens) t = static_cast<int>(SplitMix64(state) % TinyConfig().vocab_size);
  for (int& t : targets) t = static_cast<int>(SplitMix64(state) % TinyConfig().vocab_size);
}

void SaveState(const Engine& engine, RankRun& run) {
  const EngineSnapshot snap = engine.Snapshot();
  run.range = snap.range;
  run.optimizer_step = snap.optimizer_step;
  for (size_t i = 0; i < snap.tensors.size(); ++i) {
    std::vector<float> values(snap.tensors[i].second.begin(), snap.tensors[i].second.end());
    if (snap.stream) {
      REQUIRE(snap.stream(i, [&](std::span<const float> piece) {
                values.insert(values.end(), piece.begin(), piece.end());
                return Status::Ok();
              }).ok());
    }
    REQUIRE(values.size() == snap.range.size());
    run.state.push_back(std::move(values));
  }
}

// Steps of `accumulation` micro-steps; `micro_step(engine, step, micro)` runs one forward and
// backward and returns its loss.
template <class MicroStep>
void Train(Engine& engine, int first_step, int steps, int accumulation, RankRun& run, const MicroStep& micro_step) {
  for (int step = first_step; step < first_step + steps; ++step) {
    engine.BeginStep(accumulation);
    for (int micro = 0; micro < accumulation; ++micro) run.losses.push_back(micro_step(step, micro));
    Result<StepStats> stats = engine.Step();
    REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
    run.norms.push_back(stats->grad_norm);
    run.skipped.push_back(stats->skipped ? 1 : 0);
  }
}

InitialValues InitialOf(const GptModel& shape) {
  return [&shape](size_t begin, std::span<float> out) { shape.InitRange(begin, out, kInitSeed); };
}

// The CPU engine with GptModel, one thread per rank.
struct CpuRank {
  GptModel model{TinyConfig(), kBatch};
  std::unique_ptr<Engine> engine;

  CpuRank(Communicator& comm, const EngineOptions& options) {
    auto created = Engine::Create(model.layout(), comm, options, InitialOf(model));
    REQUIRE_MESSAGE(created.ok(), created.status().ToString());
    engine = std::move(*created);
  }
  float MicroStep(int rank, int step, int micro, int accumulation) {
    std::vector<int> tokens(kBatch * kSeq), targets(kBatch * kSeq);
    FillBatch(rank, step, micro, tokens, targets);
    const float loss = model.Forward(engine->access(), tokens.data(), targets.data(), kBatch, kSeq);
    model.Backward(engine->access(), static_cast<float>(engine->loss_scale() / accumulation));
    return loss;
  }
};

// The device engine with GptCuda<float>, on the stand-ins.
struct DeviceRank {
  GptModel shape{TinyConfig(), 0};
  ops::cuda::CublasLtContext ctx = std::move(*ops::cuda::CublasLtContext::Create());
  std::unique_ptr<GptCuda<float>> model;
  testing::HostCollectives collectives;
  std::unique_ptr<DeviceEngine> engine;

  DeviceRank(Communicator& comm, const EngineOptions& options) : collectives(comm) {
    auto made = GptCuda<float>::Create(TinyConfig(), kBatch, ctx);
    REQUIRE_MESSAGE(made.ok(), made.status().ToString());
    model = std::move(*made);
    auto created = DeviceEngine::Create(model->layout(), collectives, options, InitialOf(shape), nullptr);
    REQUIRE_MESSAGE(created.ok(), created.status().ToString());
    engine = std::move(*created);
  }
  float MicroStep(int rank, int step, int micro, int accumulation) {
    std::vector<int> tokens(kBatch * kSeq), targets(kBatch * kSeq);
    FillBatch(rank, step, micro, tokens, targets);
    DeviceParameterAccess<float>& access = engine->device_access();
    const Status forward = model->Forward(access, tokens.data(), targets.data(), kBatch, kSeq, nullptr);
    REQUIRE_MESSAGE(forward.ok(), forward.ToString());
    Result<float> loss = model->MeanLoss(nullptr);
    REQUIRE(loss.ok());
    const Status backward = model->Backward(access, static_cast<float>(engine->loss_scale() / accumulation), nullptr);
    REQUIRE_MESSAGE(backward.ok(), backward.ToString());
    return *loss;
  }
};

// `steps` steps on `world` ranks of engine kind Rank (CpuRank or DeviceRank); every rank's run.
template <class Rank>
std::vector<RankRun> RunOn(int world, const EngineOptions& options, int steps, int accumulation) {
  std::vector<RankRun> runs(world);
  testing::ThreadCommunicatorGroup group(world, std::chrono::seconds(20));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      Rank rank(group.Get(r), options);
      Train(*rank.engine, 0, steps, accumulation, runs[r],
            [&](int step, int micro) { return rank.MicroStep(r, step, micro, accumulation); });
      SaveState(*rank.engine, runs[r]);
    });
  }
  for (auto& t : threads) t.join();
  return runs;
}

template <class T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

TEST_CASE("the device engine on the stand-ins gives ZeroEngine's losses, norms and saved state to the bit") {
  for (int stage = 0; stage <= 3; ++stage) {
    for (Precision precision : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
      for (int world = 1; world <= 3; ++world) {
        CAPTURE(stage);
        CAPTURE(PrecisionName(precision));
        CAPTURE(world);
        const EngineOptions options = OptionsFor(stage, precision);
        const int steps = 4, accumulation = 2;
        const std::vector<RankRun> cpu = RunOn<CpuRank>(world, options, steps, accumulation);
        const std::vector<RankRun> device = RunOn<DeviceRank>(world, options, steps, accumulation);
        for (int r = 0; r < world; ++r) {
          CAPTURE(r);
          CHECK(SameBits(device[r].losses, cpu[r].losses));
          CHECK(SameBits(device[r].norms, cpu[r].norms));  // an overflow's inf or NaN too
          CHECK(device[r].skipped == cpu[r].skipped);
          CHECK(device[r].optimizer_step == cpu[r].optimizer_step);
          CHECK(device[r].range.begin == cpu[r].range.begin);
          CHECK(device[r].range.end == cpu[r].range.end);
          REQUIRE(device[r].state.size() == cpu[r].state.size());
          for (size_t i = 0; i < cpu[r].state.size(); ++i) {
            CAPTURE(i);
            CHECK(SameBits(device[r].state[i], cpu[r].state[i]));
          }
        }
        // The runs train: the loss moves, and fp16 skipped its first steps and then updated.
        CHECK(cpu[0].losses.front() != cpu[0].losses.back());
        if (precision == Precision::kFp16) {
          CHECK(cpu[0].skipped.front() == 1);
          CHECK(cpu[0].optimizer_step >= 1);
          CHECK(cpu[0].optimizer_step < steps);
        } else {
          CHECK(cpu[0].optimizer_step == steps);
        }
      }
    }
  }
}

}  // namespace
}  // namespace dslaunch::runtime
