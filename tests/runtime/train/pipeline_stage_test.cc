// The pipelined step (runtime/train/pipeline_stage.h) on in-process ranks: stages on threads, each
// with its own engine, against the whole model trained by one engine with the same micro-batches.
#include "runtime/train/pipeline_stage.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "runtime/engine/engine.h"
#include "tests/fakes/thread_communicator.h"

namespace dslaunch::runtime {
namespace {

using testing::ThreadCommunicatorGroup;

// 4 blocks of width 16, a vocabulary of 23; micro-batches of 2 sequences of 8 tokens.
GptConfig Model() { return GptConfig{4, 2, 16, 8, 23}; }
constexpr int kBatch = 2, kSeq = 8, kMicroBatches = 4, kSteps = 3;
constexpr uint64_t kSeed = 7;

// Micro-batch `mb` of step `step`: a fixed pseudo-random text, the targets its next tokens.
void FillFor(int step, int mb, std::vector<int>& tokens, std::vector<int>& targets) {
  for (int i = 0; i < kBatch * kSeq; ++i) {
    const int base = step * 131 + mb * 31 + i;
    tokens[i] = (base * 7 + 3) % 23;
    targets[i] = ((base + 1) * 7 + 3) % 23;
  }
}

EngineOptions Options(int stage) {
  EngineOptions options;
  options.zero.stage = stage;
  options.optimizer.lr = 1e-2;
  options.optimizer.weight_decay = 0.1;
  return options;
}

struct Run {
  std::vector<float> losses;                               // per step, the mean over micro-batches
  std::vector<double> norms;                               // per step
  std::map<std::string, std::vector<float>> after_first;  // every tensor after step 1
};

std::map<std::string, std::vector<float>> ByName(const ParameterLayout& layout, const std::vector<float>& flat) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& g : layout.groups()) {
    for (const auto& t : g.tensors) out[t.name].assign(flat.begin() + t.offset, flat.begin() + t.offset + t.numel);
  }
  return out;
}

// The whole model on one rank, accumulating the micro-batches.
Run Whole() {
  GptModel model(Model(), kBatch);
  std::vector<float> initial(model.layout().numel());
  model.InitParameters(initial, kSeed);
  ThreadCommunicatorGroup group(1);
  auto engine = Engine::Create(model.layout(), group.Get(0), Options(0), std::span<const float>(initial));
  REQUIRE(engine.ok());
  Run run;
  std::vector<int> tokens(kBatch * kSeq), targets(kBatch * kSeq);
  for (int step = 0; step < kSteps; ++step) {
    (*engine)->BeginStep(kMicroBatches);
    double loss = 0;
    for (int mb = 0; mb < kMicroBatches; ++mb) {
      FillFor(step, mb, tokens, targets);
      loss += model.Forward((*engine)->access(), tokens.data(), targets.data(), kBatch, kSeq);
      model.Backward((*engine)->access(), 1.0f / kMicroBatches);
    }
    auto stats = (*engine)->Step();
    REQUIRE(stats.ok());
    run.losses.push_back(static_cast<float>(loss / kMicroBatches));
    run.norms.push_back(stats->grad_norm);
    if (step == 0) {
      std::vector<float> values(model.layout().numel());
      REQUIRE((*engine)->GatherParameters(values).ok());
      run.after_first = ByName(model.layout(), values);
    }
  }
  return run;
}

// The same steps on `stages` pipeline stages under `schedule` (ZeRO `zero_stage` on each stage's
// one-rank data group).
Run Pipelined(int stages, PipeSchedule schedule, int zero_stage, std::vector<int>* slots = nullptr) {
  const GptConfig config = Model();
  PipelineStageOptions options{config, {}, schedule, kBatch, kSeq, kMicroBatches};
  options.partition = *PartitionLayers(LayerWeights{config.n_layer, 1, 0, 0}, stages, PartitionMethod::kUniform);
  ThreadCommunicatorGroup pipeline(stages, std::chrono::seconds(20));
  std::vector<Run> runs(stages);
  if (slots) slots->assign(stages, 0);
  std::vector<std::thread> threads;
  for (int s = 0; s < stages; ++s) {
    threads.emplace_back([&, s] {
      PipelineStage stage(options, pipeline.Get(s));
      if (slots) (*slots)[s] = stage.slots();
      const ParameterLayout& layout = stage.model().layout();
      std::vector<float> initial(layout.numel());
      stage.model().InitParameters(initial, kSeed);
      ThreadCommunicatorGroup data(1);
      auto engine = Engine::Create(layout, data.Get(0), Options(zero_stage), std::span<const float>(initial));
      REQUIRE(engine.ok());
      (*engine)->SetModelParallelGroups({&pipeline.Get(s)});
      for (int step = 0; step < kSteps; ++step) {
        (*engine)->BeginStep(kMicroBatches);
        auto loss = stage.RunStep((*engine)->access(), 1.0f / kMicroBatches,
                                  [&](int mb, std::vector<int>& tokens, std::vector<int>& targets) {
                                    FillFor(step, mb, tokens, targets);
                                  });
        REQUIRE_MESSAGE(loss.ok(), loss.status().ToString());
        auto stats = (*engine)->Step();
        REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
        runs[s].losses.push_back(static_cast<float>(*loss / kMicroBatches));
        runs[s].norms.push_back(stats->grad_norm);
        if (step == 0) {
          std::vector<float> values(layout.numel());
          REQUIRE((*engine)->GatherParameters(values).ok());
          runs[s].after_first = ByName(layout, values);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  Run all;
  all.losses = runs.back().losses;  // the loss is the last stage's
  all.norms = runs.front().norms;
  for (int s = 0; s < stages; ++s) {
    CHECK(runs[s].norms == all.norms);  // every stage takes the whole model's norm
    for (auto& [name, v] : runs[s].after_first) all.after_first[name] = v;
  }
  return all;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void CheckAgainstWhole(const Run& whole, const Run& piped) {
  REQUIRE(piped.losses.size() == whole.losses.size());
  // Step 1 starts from the same values: the same forward, so the same loss to the bit.
  CHECK(std::memcmp(&piped.losses[0], &whole.losses[0], sizeof(float)) == 0);
  // After it, every parameter but wte has the whole model's bits (their gradients are summed in the
  // same order; the optimizer is elementwise). wte's gradient adds the head's term after the
  // embedding's instead of before, and the norm sums per stage: within fp32 rounding.
  for (const auto& [name, want] : whole.after_first) {
    CAPTURE(name);
    REQUIRE(piped.after_first.count(name) == 1);
    if (name == "wte.weight") {
      const std::vector<float>& got = piped.after_first.at(name);
      for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
    } else {
      CHECK(SameBits(piped.after_first.at(name), want));
    }
  }
  for (size_t i = 0; i < whole.losses.size(); ++i) {
    CAPTURE(i);
    CHECK(piped.losses[i] == doctest::Approx(whole.losses[i]).epsilon(1e-5));
    CHECK(piped.norms[i] == doctest::Approx(whole.norms[i]).epsilon(1e-5));
  }
}

TEST_CASE("A pipeline of 2 and 4 stages, 1F1B and GPipe, trains as the whole model on the same micro-batches") {
  const Run whole = Whole();
  for (int stages : {2, 4}) {
    for (PipeSchedule schedule : {PipeSchedule::k1F1B, PipeSchedule::kGPipe}) {
      CAPTURE(stages);
      CAPTURE(PipeScheduleName(schedule));
      std::vector<int> slots;
      const Run piped = Pipelined(stages, schedule, 0, &slots);
      CheckAgainstWhole(whole, piped);
      // The activations kept: p - s micro-batches under 1F1B, all 4 under GPipe.
      for (int s = 0; s < stages; ++s) CHECK(slots[s] == (schedule == PipeSchedule::kGPipe ? 4 : stages - s));
    }
  }
}

TEST_CASE("A pipeline stage's engine may partition its state (ZeRO 1) on its data group") {
  CheckAgainstWhole(Whole(), Pipelined(2, PipeSchedule::k1F1B, 1));
}

TEST_CASE("What a stage allocates for activations is the formula the memory estimate counts") {
  for (int stages : {2, 3, 4}) {
    for (PipeSchedule schedule : {PipeSchedule::k1F1B, PipeSchedule::kGPipe}) {
      for (int m : {2, 8}) {
        CAPTURE(stages);
        CAPTURE(PipeScheduleName(schedule));
        CAPTURE(m);
        // A sequence shorter than the model's block (seq_len 6 of 8), so both sizes count.
        PipelineStageOptions options{Model(), {}, schedule, kBatch, 6, m};
        options.partition = *PartitionStages(options.model, stages, PartitionMethod::kParameters);
        ThreadCommunicatorGroup group(stages);
        for (int s = 0; s < stages; ++s) {
          CAPTURE(s);
          const PipelineStage stage(options, group.Get(s));  // builds its buffers; sends nothing
          CHECK(static_cast<double>(stage.activation_bytes()) == PipelineStage::ActivationBytes(options, stages, s));
        }
      }
    }
  }
}

}  // namespace
}  // namespace dslaunch::runtime
