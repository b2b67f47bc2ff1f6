// Training runs of the device engine (with GptCuda<float>) and of ZeroEngine (with GptModel) on the
// same tiny GPT, the same batches and options, for the device engine's tests: on the host stand-ins
// (device_engine_host_test.cc, to the bit) and on a GPU (device_engine_gpu_test.cc, within
// tolerances).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "runtime/core/random.h"
#include "runtime/engine/cuda/device_engine.h"
#include "runtime/engine/engine.h"
#include "runtime/models/cuda/gpt.h"
#include "runtime/models/gpt.h"
#include "tests/fakes/thread_communicator.h"

namespace dslaunch::runtime::testing {

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
  int64_t applied_steps = 0;
  LossScaler::State loss_scaler;
  MemoryStats memory;  // the engine's own count at the end
};

// The whole state of a run, put together from every rank's saved range, as a checkpoint holds it:
// what Engine::Restore reads.
struct WholeState {
  std::vector<std::string> names;
  std::vector<std::vector<float>> tensors;
  int step = 0;  // steps trained (the data's position; fp16 may have skipped some updates)
  int64_t optimizer_step = 0;
  int64_t applied_steps = 0;
  LossScaler::State loss_scaler;

  StateReader Reader() const {
    return [this](const std::string& name, size_t begin, size_t end, float* out) -> Status {
      for (size_t i = 0; i < names.size(); ++i) {
        if (names[i] != name) continue;
        std::copy(tensors[i].begin() + static_cast<std::ptrdiff_t>(begin),
                  tensors[i].begin() + static_cast<std::ptrdiff_t>(end), out);
        return Status::Ok();
      }
      return NotFoundError("no tensor " + name);
    };
  }
};

inline WholeState Whole(const std::vector<RankRun>& runs, const EngineOptions& options, size_t numel) {
  WholeState whole;
  whole.names = StateTensorNames(options.optimizer);
  whole.tensors.assign(whole.names.size(), std::vector<float>(numel));
  for (const RankRun& run : runs) {
    for (size_t i = 0; i < run.state.size(); ++i) {
      std::copy(run.state[i].begin(), run.state[i].end(), whole.tensors[i].begin() + static_cast<std::ptrdiff_t>(run.range.begin));
    }
  }
  whole.step = static_cast<int>(runs.front().norms.size());
  whole.optimizer_step = runs.front().optimizer_step;
  whole.applied_steps = runs.front().applied_steps;
  whole.loss_scaler = runs.front().loss_scaler;
  return whole;
}

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
  run.applied_steps = snap.applied_steps;
  run.loss_scaler = snap.loss_scaler;
  run.memory = engine.memory();
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

// The device engine with GptCuda<float>, its kernels on `compute`.
struct DeviceRank {
  GptModel shape{TinyConfig(), 0};
  ops::cuda::CublasLtContext ctx = std::move(*ops::cuda::CublasLtContext::Create());
  std::unique_ptr<GptCuda<float>> model;
  cudaStream_t stream;
  std::unique_ptr<DeviceEngine> engine;

  DeviceRank(DeviceCollectives& collectives, const EngineOptions& options, cudaStream_t compute) : stream(compute) {
    auto made = GptCuda<float>::Create(TinyConfig(), kBatch, ctx);
    REQUIRE_MESSAGE(made.ok(), made.status().ToString());
    model = std::move(*made);
    auto created = DeviceEngine::Create(model->layout(), collectives, options, InitialOf(shape), stream);
    REQUIRE_MESSAGE(created.ok(), created.status().ToString());
    engine = std::move(*created);
  }
  float MicroStep(int rank, int step, int micro, int accumulation) {
    std::vector<int> tokens(kBatch * kSeq), targets(kBatch * kSeq);
    FillBatch(rank, step, micro, tokens, targets);
    DeviceParameterAccess<float>& access = engine->device_access();
    const Status forward = model->Forward(access, tokens.data(), targets.data(), kBatch, kSeq, stream);
    REQUIRE_MESSAGE(forward.ok(), forward.ToString());
    Result<float> loss = model->MeanLoss(stream);
    REQUIRE_MESSAGE(loss.ok(), loss.status().ToString());
    const Status backward = model->Backward(access, static_cast<float>(engine->loss_scale() / accumulation), stream);
    REQUIRE_MESSAGE(backward.ok(), backward.ToString());
    return *loss;
  }
};

// Rank `r` of a run (a CpuRank or a DeviceRank): with `from`, it restores that state first and goes
// on from its step; then `steps` steps, and its saved state.
template <class Rank>
RankRun TrainRank(Rank& rank, int r, int steps, int accumulation, const WholeState* from = nullptr) {
  RankRun run;
  int first = 0;
  if (from != nullptr) {
    const Status restored =
        rank.engine->Restore(from->Reader(), from->optimizer_step, from->applied_steps, from->loss_scaler);
    REQUIRE_MESSAGE(restored.ok(), restored.ToString());
    first = from->step;
  }
  Train(*rank.engine, first, steps, accumulation, run,
        [&](int step, int micro) { return rank.MicroStep(r, step, micro, accumulation); });
  SaveState(*rank.engine, run);
  return run;
}

// `steps` steps of the ranks of `world`, one thread each: `make(rank, comm)` makes a CpuRank or a
// DeviceRank on the rank's thread communicator. With `from`, every rank restores it first and the
// run goes on from its step. Every rank's run.
template <class Make>
std::vector<RankRun> RunOn(int world, int steps, int accumulation, const Make& make, const WholeState* from = nullptr) {
  std::vector<RankRun> runs(world);
  ThreadCommunicatorGroup group(world, std::chrono::seconds(20));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto rank = make(r, group.Get(r));
      runs[r] = TrainRank(*rank, r, steps, accumulation, from);
    });
  }
  for (auto& t : threads) t.join();
  return runs;
}

template <class T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

}  // namespace dslaunch::runtime::testing
