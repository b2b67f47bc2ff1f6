// The training loop at a restart, with the in-process communicator and real checkpoint files: the
// progress reports every rank makes (runtime/train/progress_report.h) around steps, validation and
// checkpoint saves and loads; the first-step callback the generation record hangs on; and the
// automatic resume from checkpoint.dir of a restarted generation (checkpoint.resume_newest).
#include <doctest/doctest.h>

#include <algorithm>

#include <filesystem>
#include <fstream>
#include <mutex>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/resume.h"
#include "runtime/train/trainer.h"
#include "tests/fakes/train_on_threads.h"
#include "tests/support/subprocess.h"

namespace dslaunch::runtime {
namespace {

TrainConfig Config(int64_t steps, const std::string& ckpt_dir) {
  TrainConfig c;
  c.batch = {8, 2, 2};  // world 2
  c.engine.optimizer.kind = OptimizerKind::kAdamW;
  c.engine.optimizer.lr = 3e-3;
  c.model = GptConfig{2, 2, 16, 8, 32};
  c.data.seq_len = 8;
  c.train.steps = steps;
  c.train.eval_steps = 2;
  c.train.watchdog_timeout = 20.0;
  c.steps_per_print = 100;
  c.seed = 5;
  c.engine.zero.stage = 2;
  c.source_sha256 = "test";
  c.checkpoint.dir = ckpt_dir;
  c.checkpoint.interval = 2;
  return c;
}

struct RankRecord {
  std::vector<std::string> reports;
  std::vector<int64_t> first_steps;  // first_step_done calls
  std::vector<std::string> lines;
};

// Runs on 2 threads, each rank with its own reporter; returns rank 0's result and fills records.
Result<TrainResult> Run(const TrainConfig& config, std::vector<RankRecord>* records) {
  records->assign(2, {});
  std::vector<std::unique_ptr<ProgressReporter>> reporters;
  for (int r = 0; r < 2; ++r) {
    RankRecord* record = &(*records)[static_cast<size_t>(r)];
    reporters.push_back(std::make_unique<ProgressReporter>(
        WatchdogSettings{std::nullopt, config.train.watchdog_timeout},
        [record](const std::string& report) { record->reports.push_back(report); }));
  }
  return testing::TrainOnThreads(2, config, testing::PatternTokens(/*validation=*/true), [&](int r) {
    RankRecord* record = &(*records)[static_cast<size_t>(r)];
    TrainHooks hooks;
    hooks.print = [record](const std::string& line) { record->lines.push_back(line); };
    hooks.reporter = reporters[static_cast<size_t>(r)].get();
    hooks.first_step_done = [record](int64_t step) { record->first_steps.push_back(step); };
    return hooks;
  })[0];
}

// "STEP timeout=T\n" of a report, without its figures (which carry measured times).
std::string Head(const std::string& report) {
  const size_t second_space = report.find(' ', report.find(' ') + 1);
  return second_space == std::string::npos ? report : report.substr(0, second_space) + "\n";
}
std::vector<std::string> Heads(const std::vector<std::string>& reports, size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < std::min(n, reports.size()); ++i) out.push_back(Head(reports[i]));
  return out;
}

bool Contains(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& l : lines) {
    if (l.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST_CASE("Every rank reports each step, each validation batch, and a longer allowance around checkpoint saves") {
  dslaunch::testing::TempDir dir;
  std::vector<RankRecord> records;
  auto result = Run(Config(4, dir.path() + "/ckpt"), &records);
  REQUIRE_MESSAGE(result.ok(), result.status().ToString());
  const std::vector<std::string> expected = {
      "0 timeout=300\n",                                         // start-up
      "1 timeout=20\n",  "2 timeout=20\n",                       // steps
      "2 timeout=600\n", "2 timeout=600\n", "2 timeout=20\n",   // the periodic save of step 2, saved
      "3 timeout=20\n",  "4 timeout=20\n",                       // steps
      "4 timeout=600\n", "4 timeout=600\n", "4 timeout=20\n",   // the final save, saved
      "4 timeout=20\n",  "4 timeout=20\n",                       // two validation batches
      "4 timeout=20\n",                                         // the validation's loss
  };
  CHECK(Heads(records[0].reports, 100) == expected);
  CHECK(Heads(records[1].reports, 100) == expected);
  // The figures: each step's time, loss and throughput from the first step on, the save of step 2
  // from its report on, the validation loss in the last report.
  for (const RankRecord& record : records) {
    const std::vector<std::string>& reports = record.reports;
    REQUIRE(reports.size() == expected.size());
    CHECK(reports[0] == "0 timeout=300\n");
    CHECK(Contains({reports[1]}, " step_ms="));
    CHECK(Contains({reports[1]}, " compute_ms="));
    CHECK(Contains({reports[1]}, " loss="));
    CHECK(Contains({reports[1]}, " tokens_per_s="));
    CHECK_FALSE(Contains({reports[3]}, "ckpt_step="));
    CHECK(Contains({reports[4]}, " ckpt_bytes="));
    CHECK(Contains({reports[4]}, " ckpt_step=2\n"));
    CHECK(Contains({reports[9]}, " ckpt_step=4\n"));
    CHECK_FALSE(Contains({reports[12]}, "val_loss="));
    CHECK(Contains({reports.back()}, " val_loss="));
    CHECK(Contains({reports.back()}, " val_step=4 "));
  }
  // The generation record's hook: rank 0, once, with the step the run started from.
  CHECK(records[0].first_steps == std::vector<int64_t>{0});
  CHECK(records[1].first_steps.empty());
}

TEST_CASE("A restarted generation resumes from the newest checkpoint in checkpoint.dir without `load`") {
  dslaunch::testing::TempDir dir;
  std::vector<RankRecord> records;
  // The uninterrupted run, and a first generation that stops after 4 steps (saved at 2 and 4).
  auto full = Run(Config(6, dir.path() + "/full"), &records);
  REQUIRE(full.ok());
  auto first = Run(Config(4, dir.path() + "/ckpt"), &records);
  REQUIRE(first.ok());

  TrainConfig restart = Config(6, dir.path() + "/ckpt");
  restart.checkpoint.resume_newest = true;  // what ParseTrainConfig sets at generation > 0
  REQUIRE(restart.checkpoint.load == CheckpointLoad::kNone);
  auto resumed = Run(restart, &records);
  REQUIRE_MESSAGE(resumed.ok(), resumed.status().ToString());
  CHECK(resumed->first_step == 4);
  REQUIRE(resumed->losses.size() == 2);
  CHECK(resumed->losses[0] == full->losses[4]);  // bitwise: same world size and stage
  CHECK(resumed->losses[1] == full->losses[5]);
  CHECK(Contains(records[0].lines, "restart: resumed from " + dir.path() + "/ckpt/global_step4 at step 4"));
  CHECK(records[0].first_steps == std::vector<int64_t>{4});
  // The load is a slow phase at start-up; then the step resumed, then training.
  REQUIRE(records[1].reports.size() >= 4);
  CHECK(Heads(records[1].reports, 4) ==
        std::vector<std::string>{"0 timeout=600\n", "0 timeout=300\n", "4 timeout=300\n", "5 timeout=20\n"});

  // A restart before any checkpoint was written starts as generation 0 would.
  TrainConfig empty = Config(2, dir.path() + "/empty");
  empty.checkpoint.resume_newest = true;
  auto fresh = Run(empty, &records);
  REQUIRE(fresh.ok());
  CHECK(fresh->first_step == 0);
  CHECK(Contains(records[0].lines, "restart: no checkpoint in " + dir.path() + "/empty yet: starting at step 0"));
}

TEST_CASE("At a restart the newest checkpoint in dir wins over the one `load` names") {
  dslaunch::testing::TempDir dir;
  auto make = [&](const std::string& sub, int64_t step) {
    std::filesystem::create_directories(dir.path() + "/" + sub + "/global_step" + std::to_string(step));
    std::ofstream(dir.path() + "/" + sub + "/global_step" + std::to_string(step) + "/meta.json") << "{}";
    std::ofstream(dir.path() + "/" + sub + "/latest") << "global_step" << step << "\n";
  };
  make("pretrained", 100);
  CheckpointConfig c;
  c.dir = dir.path() + "/run";
  c.load = CheckpointLoad::kPath;
  c.load_path = dir.path() + "/pretrained";
  c.resume_newest = true;
  // The candidates a plan tries, in order.
  auto planned = [](const CheckpointConfig& config) {
    Result<ResumePlan> plan = PlanCheckpointResume(config);
    REQUIRE_MESSAGE(plan.ok(), plan.status().ToString());
    std::vector<std::string> paths;
    for (const auto& c : plan->candidates) paths.push_back(c.path);
    return std::pair{plan->mode, paths};
  };
  using Paths = std::vector<std::string>;
  // Nothing saved by this run yet: what `load` names.
  CHECK(planned(c) == std::pair{ResumeMode::kExplicit, Paths{dir.path() + "/pretrained/global_step100"}});
  make("run", 6);
  CHECK(planned(c) == std::pair{ResumeMode::kNewest, Paths{dir.path() + "/run/global_step6"}});
  c.resume_newest = false;  // generation 0
  CHECK(planned(c) == std::pair{ResumeMode::kExplicit, Paths{dir.path() + "/pretrained/global_step100"}});
}

}  // namespace
}  // namespace dslaunch::runtime
