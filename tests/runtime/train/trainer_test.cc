// The training loop end to end with the in-process communicator: the same run at world size 1, 2
// and 4 (same seed, data and global batch) gives the same losses, and training lowers the loss.
#include "runtime/train/trainer.h"

#include <doctest/doctest.h>

#include "common/display_text.h"

#include <cmath>
#include <functional>

#include "runtime/data/idx_synthetic.h"
#include "runtime/engine/engine.h"
#include "runtime/models/gpt.h"
#include "tests/fakes/thread_communicator.h"
#include "tests/fakes/train_on_threads.h"

namespace dslaunch::runtime {
namespace {

TrainConfig TinyConfig(int world, int micro, int global_batch) {
  TrainConfig c;
  c.batch.train_batch_size = global_batch;
  c.batch.micro_batch_per_gpu = micro;
  c.batch.gradient_accumulation_steps = global_batch / (micro * world);
  c.engine.optimizer.kind = OptimizerKind::kAdamW;
  c.engine.optimizer.lr = 3e-3;
  c.engine.optimizer.weight_decay = 0.01;
  c.engine.gradient_clipping = 1.0;
  c.model = GptConfig{2, 2, 16, 8, 32};
  c.data.seq_len = 8;
  c.train.steps = 20;
  c.train.eval_steps = 2;
  c.steps_per_print = 10;
  c.seed = 5;
  return c;
}

// Text with structure (a repeating pattern with noise) so the model has something to learn.
TrainData TinyData() { return testing::PatternTokens(/*validation=*/true); }

using Mutator = std::function<void(TrainConfig&)>;

std::vector<TrainResult> RunWorld(int world, int micro, const Mutator& mutate = {}, std::vector<std::string>* lines = nullptr) {
  TrainConfig config = TinyConfig(world, micro, 8);
  if (mutate) mutate(config);
  auto outcomes = testing::TrainOnThreads(world, config, TinyData(), [&](int) {
    TrainHooks hooks;
    hooks.print = [&](const std::string& l) {
      if (lines != nullptr) lines->push_back(l);
    };
    return hooks;
  });
  std::vector<TrainResult> results;
  for (auto& r : outcomes) {
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    results.push_back(*r);
  }
  return results;
}

std::vector<TrainResult> RunWorld(int world, int micro, int stage) {
  return RunWorld(world, micro, [stage](TrainConfig& c) { c.engine.zero.stage = stage; });
}

// Small buckets, so that every path runs several collectives per step: reduce-scatter buckets of
// about one block, all-gathers in pieces, stage 3 fetching a block ahead, ln_f persistent.
Mutator Stage(int stage, Precision precision = Precision::kFp32) {
  return [=](TrainConfig& c) {
    c.engine.zero.stage = stage;
    c.engine.zero.reduce_bucket_size = 4000;
    c.engine.zero.allgather_bucket_size = 2500;
    c.engine.zero.stage3_prefetch_bucket_size = 7000;
    c.engine.zero.stage3_param_persistence_threshold = 100;
    c.engine.precision = precision;
  };
}

// max_i |a_i - b_i| / |b_i|
double MaxRelativeDifference(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / std::abs(b[i]));
  return worst;
}

TEST_CASE("ZeRO stage 0 in fp32 gives the same losses at world size 1, 2 and 4 with the same global batch") {
  auto one = RunWorld(1, 2);    // accumulation 4
  auto two = RunWorld(2, 2);    // accumulation 2
  auto four = RunWorld(4, 2);   // accumulation 1
  const auto& ref = one[0].losses;
  REQUIRE(ref.size() == 20);
  for (const auto* other : {&two[0].losses, &two[1].losses, &four[0].losses, &four[3].losses}) {
    REQUIRE(other->size() == ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      CAPTURE(i);
      // fp32: only the order of the gradient sums differs; the bound is 1e-5 relative.
      CHECK(std::abs((*other)[i] - ref[i]) <= 1e-5 * std::abs(ref[i]));
    }
  }
  // And it learns: the last losses are well below the first (log 32 = 3.47 at the start).
  CHECK(ref.front() > 3.0);
  CHECK(ref.back() < ref.front() - 0.5);
  // Every rank returns the one all-reduced validation loss; the pattern without noise is easier
  // than the noisy training text.
  CHECK(two[0].val_loss == two[1].val_loss);
  CHECK(four[0].val_loss == four[3].val_loss);
  CHECK(one[0].val_loss < ref.back());
}

TEST_CASE("The validation loss is the mean over the batches and the ranks") {
  // Validation text of one repeated token: every window is the same, so the mean over any
  // number of batches and ranks is the loss of one window, and runs that train to the same
  // parameters (world size 1, 2 and 4, within fp32 reordering) report the same validation loss.
  TrainData data = TinyData();
  data.val.assign(600, 7);
  auto run = [&](int world, int eval_steps) {
    TrainConfig config = TinyConfig(world, 2, 8);
    config.train.eval_steps = eval_steps;
    auto results = testing::TrainOnThreads(world, config, data);
    for (const auto& r : results) REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    return results[0]->val_loss;
  };
  const double one = run(1, 1);
  CHECK(run(1, 3) == one);  // the mean of 3 equal losses, exactly
  for (int world : {2, 4}) {
    CAPTURE(world);
    CHECK(std::abs(run(world, 2) - one) <= 1e-5 * one);
  }
}

TEST_CASE("ZeRO stages 1, 2 and 3 give the losses of stage 0 at world size 1, 2, 3 and 4") {
  const auto ref = RunWorld(1, 2, 0)[0].losses;
  for (int stage : {1, 2, 3}) {
    for (int world : {1, 2, 3, 4}) {
      CAPTURE(stage);
      CAPTURE(world);
      // The global batch of 8 does not divide by 3: world 3 runs a global batch of 6 against a
      // one-rank stage-0 run of the same batch (and 7232 parameters do not divide by 3 either).
      if (world == 3) {
        auto mutate = [stage](TrainConfig& c) {
          Stage(stage)(c);
          c.batch.train_batch_size = 6;
          c.batch.gradient_accumulation_steps = 1;
        };
        auto base = RunWorld(1, 6, [](TrainConfig& c) {
          c.batch.train_batch_size = 6;
          c.batch.gradient_accumulation_steps = 1;
        })[0].losses;
        for (const auto& r : RunWorld(3, 2, mutate)) CHECK(MaxRelativeDifference(r.losses, base) <= 1e-5);
        continue;
      }
      for (const auto& r : RunWorld(world, 2, Stage(stage))) {
        // fp32: only the order of the gradient sums differs; the bound is 1e-5 relative.
        CHECK(MaxRelativeDifference(r.losses, ref) <= 1e-5);
      }
    }
  }
}

TEST_CASE("overlap_comm changes no bit of the training or validation losses at stages 1-3, in every precision") {
  // World 3 with accumulation 2: runs across shard boundaries, the last micro-step's reduction.
  for (int stage : {1, 2, 3}) {
    for (Precision precision : {Precision::kFp32, Precision::kFp16, Precision::kBf16}) {
      CAPTURE(stage);
      CAPTURE(PrecisionName(precision));
      auto with = [&](bool overlap) {
        return RunWorld(3, 1, [&](TrainConfig& c) {
          Stage(stage, precision)(c);
          c.batch.train_batch_size = 6;
          c.batch.gradient_accumulation_steps = 2;
          c.train.steps = 6;
          c.engine.zero.overlap_comm = overlap;
        });
      };
      const std::vector<TrainResult> off = with(false), on = with(true);
      for (size_t r = 0; r < off.size(); ++r) {
        CHECK(on[r].losses == off[r].losses);
        CHECK(on[r].val_loss == off[r].val_loss);  // after the last update
      }
    }
  }
}

TEST_CASE("fp16 and bf16 storage give the fp32 losses within their stated tolerance at every stage and world size") {
  // Tolerances (docs/engine.md, "Mixed precision"): the model reads its parameters rounded to
  // 11 (fp16) or 8 (bf16) significant bits, a relative error of at most 2^-11 = 4.9e-4 or
  // 2^-8 = 3.9e-3 per weight, and gradients are stored with the same precision. The errors are
  // independent and largely cancel in the loss; we allow a quarter of the per-weight bound:
  // 1e-4 for fp16 and 1e-3 for bf16 (measured maxima on this test: 9.8e-6 and 1.3e-4).
  const auto ref = RunWorld(1, 2, 0)[0].losses;
  for (auto [precision, tolerance] : {std::pair{Precision::kFp16, 1e-4}, {Precision::kBf16, 1e-3}}) {
    for (int stage : {0, 1, 2, 3}) {
      for (int world : {1, 2, 4}) {
        CAPTURE(PrecisionName(precision));
        CAPTURE(stage);
        CAPTURE(world);
        const auto results = RunWorld(world, 2, Stage(stage, precision));
        for (const auto& r : results) CHECK(MaxRelativeDifference(r.losses, ref) <= tolerance);
        // 16-bit storage changes the numbers: equal losses would mean the precision was ignored.
        CHECK(MaxRelativeDifference(results[0].losses, ref) > 0.0);
      }
    }
  }
}

TEST_CASE("fp16 and bf16 with SGD give the fp32 losses: the step unscales the gradients") {
  // Adam's update does not change when every gradient is multiplied by the same factor, so the
  // case above cannot tell whether the loss scale was divided out before the step; SGD's can.
  auto sgd = [](int stage, Precision precision) {
    return [=](TrainConfig& c) {
      Stage(stage, precision)(c);
      c.engine.optimizer.kind = OptimizerKind::kSgd;
      c.engine.optimizer.lr = 0.5;
      c.engine.optimizer.momentum = 0.9;
      c.engine.optimizer.weight_decay = 0.0;
    };
  };
  const auto ref = RunWorld(1, 2, sgd(0, Precision::kFp32))[0].losses;
  CHECK(ref.back() < ref.front() - 0.1);  // it learns (3.48 -> 3.33)
  for (auto [precision, tolerance] : {std::pair{Precision::kFp16, 1e-4}, {Precision::kBf16, 1e-3}}) {
    for (int stage : {0, 2}) {
      CAPTURE(PrecisionName(precision));
      CAPTURE(stage);
      const auto losses = RunWorld(2, 2, sgd(stage, precision))[0].losses;
      CHECK(MaxRelativeDifference(losses, ref) <= tolerance);
    }
  }
}

TEST_CASE("Training in fp16 from a scale that overflows logs each skipped step, halves the scale and then learns") {
  for (int stage : {0, 1, 2, 3}) {
    CAPTURE(stage);
    std::vector<std::string> lines;
    const auto losses = RunWorld(2, 2, [stage](TrainConfig& c) {
      Stage(stage, Precision::kFp16)(c);
      c.engine.loss_scaler.initial_scale_power = 28;  // gradients of this model overflow fp16 above about 2^18
      c.engine.loss_scaler.hysteresis = 1;
      c.train.steps = 30;
    }, &lines)[0].losses;
    double expected = std::ldexp(1.0, 28);
    int skipped = 0;
    for (const auto& l : lines) {
      if (l.find("overflow: skipping step") == std::string::npos) continue;
      CAPTURE(l);
      ++skipped;
      char buf[96];
      std::snprintf(buf, sizeof(buf), "loss scale %.0f -> %.0f", expected, expected / 2);
      CHECK(l.find(buf) != std::string::npos);
      expected /= 2;
    }
    CHECK(skipped >= 10);
    CHECK(skipped <= 14);
    CHECK(losses.back() < losses.front() - 0.3);
  }
}

TEST_CASE("The mlp model trains on IDX images with the same losses at world size 1 and 2, stage 0 and 3") {
  TrainData data;
  data.train_images = MakeSyntheticDigits(2000, 1);
  data.val_images = MakeSyntheticDigits(256, 2);
  auto config = [](int world, int stage) {
    TrainConfig c;
    c.batch.train_batch_size = 32;
    c.batch.micro_batch_per_gpu = 16;
    c.batch.gradient_accumulation_steps = 32 / (16 * world);
    c.engine.optimizer.kind = OptimizerKind::kAdamW;  // DeepSpeed's "Adam" (adam_w_mode defaults to true)
    c.engine.optimizer.lr = 2e-3;
    c.model = MlpConfig{{784, 64, 10}};
    c.data.format = DataFormat::kIdx;
    c.train.steps = 120;
    c.train.eval_steps = 8;
    c.steps_per_print = 20;
    c.engine.zero.stage = stage;
    return c;
  };
  auto run = [&](int world, int stage, std::vector<std::string>* lines) {
    auto results = testing::TrainOnThreads(world, config(world, stage), data, [&](int r) {
      TrainHooks hooks;
      hooks.print = [&, r](const std::string& l) {
        if (r == 0 && lines != nullptr) lines->push_back(l);
      };
      return hooks;
    });
    for (const auto& r : results) REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    return *results[0];
  };
  std::vector<std::string> lines;
  const TrainResult one = run(1, 0, &lines);
  for (int stage : {0, 3}) {
    CAPTURE(stage);
    CHECK(MaxRelativeDifference(run(2, stage, nullptr).losses, one.losses) <= 1e-5);
  }
  // From ln 10 = 2.30 to well below; and the validation line reports an accuracy.
  CHECK(one.losses.front() > 2.0);
  CHECK(one.val_loss < 1.0);
  REQUIRE(!lines.empty());
  CHECK(lines.front().rfind("model mlp: 50890 parameters", 0) == 0);
  CHECK(lines.back().find("accuracy") != std::string::npos);
}

TEST_CASE("An mlp config without images, or images that do not fit the model, is refused with the reason") {
  testing::ThreadCommunicatorGroup group(1);
  TrainConfig c = TinyConfig(1, 2, 2);
  c.model = MlpConfig{{784, 10}};
  auto r = Train(c, TinyData(), group.Get(0), [](const std::string&) {});
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message().find("data.format") != std::string::npos);
  TrainData data;
  data.train_images = MakeSyntheticDigits(20, 1);
  c.model = MlpConfig{{100, 10}};
  r = Train(c, data, group.Get(0), [](const std::string&) {});
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message().find("data.train") != std::string::npos);
}

TEST_CASE("At ZeRO stage 1 each rank keeps only its partition of the Adam state") {
  GptModel model(GptConfig{2, 2, 16, 8, 32}, 1);
  const size_t numel = model.layout().numel();
  std::vector<float> initial(numel, 0.1f);
  testing::ThreadCommunicatorGroup group(4);
  EngineOptions o;
  o.zero.stage = 1;
  size_t total = 0;
  for (int r = 0; r < 4; ++r) {
    auto engine = Engine::Create(model.layout(), group.Get(r), o, initial);
    REQUIRE(engine.ok());
    const size_t state = (*engine)->memory().optimizer_state;
    CHECK(state >= 8 * (numel / 4));
    CHECK(state <= 8 * (numel / 4 + 1));
    total += state;
  }
  CHECK(total == 8 * numel);
  o.zero.stage = 0;
  auto full = Engine::Create(model.layout(), group.Get(0), o, initial);
  REQUIRE(full.ok());
  CHECK((*full)->memory().optimizer_state == 8 * numel);
}

TEST_CASE("Train validates every eval_interval steps and ends with a reproducible sample") {
  TrainData data = TinyData();
  TrainConfig c = TinyConfig(1, 2, 2);
  c.train.steps = 6;
  c.train.eval_interval = 3;
  c.train.sample_tokens = 12;
  c.train.sample_prompt = "ab";
  auto run = [&] {
    testing::ThreadCommunicatorGroup group(1);
    std::vector<std::string> lines;
    auto r = Train(c, data, group.Get(0), [&](const std::string& l) { lines.push_back(l); });
    REQUIRE(r.ok());
    return lines;
  };
  auto lines = run();
  int validations = 0;
  for (const auto& l : lines) validations += l.find("validation loss") != std::string::npos;
  CHECK(validations == 2);  // after steps 3 and 6
  REQUIRE(lines.back().rfind("sample:\n", 0) == 0);
  // 12 bytes of the model's, printed with control bytes escaped (common/display_text.h).
  const std::string sample = lines.back().substr(std::string("sample:\n").size());
  CHECK(sample.size() >= 12);
  CHECK(DisplayText(sample) == sample);
  CHECK(run().back() == lines.back());
}

TEST_CASE("Train refuses what this build cannot train, naming it") {
  TrainData data = TinyData();
  testing::ThreadCommunicatorGroup group(1);
  TrainConfig c = TinyConfig(1, 2, 2);
  c.engine.zero.stage = 4;
  auto r = Train(c, data, group.Get(0), [](const std::string&) {});
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message().find("stage 4") != std::string::npos);
  c = TinyConfig(1, 2, 2);
  data.train.push_back(40);  // outside vocab_size 32
  r = Train(c, data, group.Get(0), [](const std::string&) {});
  CHECK(r.status().message().find("token id 40") != std::string::npos);
}

TEST_CASE("A gpt run with seq_len 1 is a language model: throughput in tokens, no accuracy") {
  // Before: a task with one token per sample was taken for the classifier: "FLOPs per sample",
  // "samples/s" and "accuracy 0.00%".
  TrainConfig c = TinyConfig(1, 2, 2);
  c.data.seq_len = 1;
  c.train.steps = 2;
  c.steps_per_print = 1;
  testing::ThreadCommunicatorGroup group(1);
  std::vector<std::string> lines, metrics;
  auto r = Train(c, TinyData(), group.Get(0), [&](const std::string& l) { lines.push_back(l); },
                 [&](const std::string& m) { metrics.push_back(m); });
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  REQUIRE(lines.size() == 4);  // model, step 1, step 2, validation
  CHECK(lines[0].find(" FLOPs per token (forward + backward)") != std::string::npos);
  CHECK(lines[1].find(" tokens/s | ") != std::string::npos);
  CHECK(lines[3].find("step 2 | validation loss ") == 0);
  CHECK(lines[3].find("accuracy") == std::string::npos);
  for (const std::string& m : metrics) CHECK(m.find("accuracy") == std::string::npos);
}

TEST_CASE("A validation shard too short for one sample is refused, naming it and data.seq_len") {
  // Before: validation was skipped without a word.
  TrainData data = TinyData();
  data.val.resize(8);  // 8 tokens: no window of 8 + 1
  testing::ThreadCommunicatorGroup group(1);
  TrainConfig c = TinyConfig(1, 2, 2);
  c.data.val = "val.bin";
  auto r = Train(c, data, group.Get(0), [](const std::string&) {});
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message() == "val.bin: 8 tokens hold no sequence of 8 + 1 tokens ($.data.seq_len is 8)");
}

}  // namespace
}  // namespace dslaunch::runtime
