// What the training loop writes, seen from its hooks (in-process communicator, real checkpoint
// files): rank 0 alone prints and records, in the documented order; and a stop request on one rank
// ends every rank after the step, with the save on stop (runtime/train/checkpoint_schedule.h).
#include <doctest/doctest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/train/trainer.h"
#include "tests/fakes/train_on_threads.h"
#include "tests/support/subprocess.h"

namespace dslaunch::runtime {
namespace {

constexpr int kWorld = 2;

TrainConfig Config(int64_t steps, const std::string& ckpt_dir) {
  TrainConfig c;
  c.batch = {8, 2, 2};  // world 2
  c.engine.optimizer.kind = OptimizerKind::kAdamW;
  c.engine.optimizer.lr = 3e-3;
  c.model = GptConfig{2, 2, 16, 8, 32};
  c.data.seq_len = 8;
  c.train.steps = steps;
  c.train.eval_interval = 2;
  c.train.eval_steps = 1;
  c.steps_per_print = 2;
  c.seed = 5;
  c.source_sha256 = "test";
  c.checkpoint.dir = ckpt_dir;
  c.checkpoint.interval = 2;
  return c;
}

struct Captured {
  std::vector<std::string> lines, records, bars;
  std::vector<int64_t> first_steps;
  size_t calls() const { return lines.size() + records.size() + bars.size() + first_steps.size(); }
};

std::vector<Result<TrainResult>> Run(const TrainConfig& config, std::vector<Captured>& out,
                                     const std::atomic<bool>* stop_on_rank1 = nullptr) {
  out.assign(kWorld, {});
  return testing::TrainOnThreads(kWorld, config, testing::PatternTokens(/*validation=*/true), [&](int r) {
    Captured* c = &out[static_cast<size_t>(r)];
    TrainHooks hooks;
    hooks.print = [c](const std::string& line) { c->lines.push_back(line); };
    hooks.metrics = [c](const std::string& json) { c->records.push_back(json); };
    hooks.progress = [c](const std::string& bar) { c->bars.push_back(bar); };
    hooks.first_step_done = [c](int64_t step) { c->first_steps.push_back(step); };
    if (r == 1) hooks.stop = stop_on_rank1;
    return hooks;
  });
}

std::vector<std::string> Events(const std::vector<std::string>& records) {
  std::vector<std::string> events;
  for (const std::string& record : records) {
    const nlohmann::json j = nlohmann::json::parse(record);
    std::string event = j.at("event");
    if (j.contains("step")) event += " " + std::to_string(j.at("step").get<int64_t>());
    events.push_back(event);
  }
  return events;
}

TEST_CASE("Rank 0 alone prints and records, in the documented order; the other rank calls no hook") {
  dslaunch::testing::TempDir dir;
  std::vector<Captured> out;
  auto results = Run(Config(4, dir.path() + "/ckpt"), out);
  for (auto& r : results) REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(out[1].calls() == 0);
  CHECK(Events(out[0].records) == std::vector<std::string>{"start", "step 1", "step 2", "checkpoint 2",
                                                          "validation 2", "step 3", "step 4", "validation 4",
                                                          "checkpoint 4", "end"});
  CHECK(out[0].first_steps == std::vector<int64_t>{0});
  CHECK(out[0].bars.size() == 4);
  // The model, then per 2 steps: the step line, the periodic save, the validation; the last
  // step's validation comes before the end-of-run save; the summary last.
  REQUIRE(out[0].lines.size() == 8);
  CHECK(out[0].lines[0].rfind("model gpt: ", 0) == 0);
  CHECK(out[0].lines[1].rfind("step 2 | loss ", 0) == 0);
  CHECK(out[0].lines[2].rfind("step 2 | checkpoint (interval) ", 0) == 0);
  CHECK(out[0].lines[3].rfind("step 2 | validation loss ", 0) == 0);
  CHECK(out[0].lines[5].rfind("step 4 | validation loss ", 0) == 0);
  CHECK(out[0].lines[6].rfind("step 4 | checkpoint (end) ", 0) == 0);
  CHECK(out[0].lines[7] == "checkpoints: 2 saved, 0 failed; last complete: " + dir.path() + "/ckpt/global_step4");
}

TEST_CASE("A stop request on one rank ends every rank after the step, with the save on stop") {
  dslaunch::testing::TempDir dir;
  std::vector<Captured> out;
  const std::atomic<bool> stop{true};
  auto results = Run(Config(10, dir.path() + "/ckpt"), out, &stop);
  for (auto& r : results) {
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    CHECK(r->stopped);
    CHECK(r->losses.size() == 1);
    CHECK(r->checkpoints == std::vector<std::string>{dir.path() + "/ckpt/global_step1"});
  }
  CHECK(out[1].calls() == 0);
  CHECK(Events(out[0].records) == std::vector<std::string>{"start", "step 1", "checkpoint 1"});
  REQUIRE(out[0].lines.size() == 4);
  CHECK(out[0].lines[1].rfind("step 1 | checkpoint (stop) ", 0) == 0);
  CHECK(out[0].lines[2] == "step 1 | stopped on request");
  CHECK(out[0].lines[3].rfind("checkpoints: 1 saved, 0 failed", 0) == 0);
}

}  // namespace
}  // namespace dslaunch::runtime
