// Rank 0's lines and metrics records (runtime/train/run_report.h, docs/engine.md "Metrics"), with
// the clock driven by the test; and the silent report of the other ranks.
#include "runtime/train/run_report.h"

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/text.h"

namespace dslaunch::runtime {
namespace {

using Clock = RunReport::Clock;
using std::chrono::milliseconds;

struct Captured {
  std::vector<std::string> lines, records, bars, events;  // events: every call, in order
  std::vector<int64_t> first_steps;

  ReportOutputs Outputs() {
    ReportOutputs out;
    out.print = [this](const std::string& s) { lines.push_back(s), events.push_back("print"); };
    out.metrics = [this](const std::string& s) { records.push_back(s), events.push_back("record"); };
    out.progress = [this](const std::string& s) { bars.push_back(s), events.push_back("bar"); };
    out.first_step_done = [this](int64_t step) { first_steps.push_back(step), events.push_back("first"); };
    return out;
  }
};

StepReport Step(int64_t step, double seconds = 0.5, int64_t tokens = 100) {
  StepReport r;
  r.step = step;
  r.loss = 2.5f;
  r.stats.lr = 1e-3;
  r.stats.loss_scale = 1.0;
  r.stats.grad_norm = 0.25;
  r.seconds = seconds;
  r.tokens = tokens;
  return r;
}

RunStart GptStart() {
  MemoryStats memory{4000000, 2000000, 16000000, 123};
  return RunStart{"gpt", 1000000, 6.5e6, false, 2, 1, "fp16", memory, 4096, RunOrigin{}};
}

TEST_CASE("A rank other than 0 gets a report that writes nothing") {
  Captured c;
  RunReport report = RunReport::ForRank(1, c.Outputs(), 1, 2);
  report.ModelInitialisedFrom("init.safetensors");
  report.Start(GptStart());
  report.Resumed("ckpt/global_step4", LoadResult{}, true);
  report.NoCheckpointYet("ckpt", false);
  report.TrainingStarts(0, Clock::time_point{});
  StepReport step = Step(1);
  step.stats.scale_event = "loss scale 65536 -> 32768";
  report.Step(step, Clock::time_point{} + milliseconds(500));
  report.Validation(ValidationReport{1, 2.0, 0.5, 4}, milliseconds(1));
  report.Stopped(2);
  report.Sample("text");
  report.CheckpointSummary("checkpoints: 1 saved, 0 failed; last complete: ckpt/global_step2");
  report.End(RunEnd{});
  CHECK_FALSE(report.recorder());
  CHECK(c.events.empty());
  CHECK(c.first_steps.empty());
}

TEST_CASE("Step lines come every steps_per_print steps and after the last, throughput without validation time") {
  Captured c;
  RunReport report = RunReport::ForRank(0, c.Outputs(), /*steps_per_print=*/3, /*total_steps=*/7);
  const Clock::time_point t0{};
  report.TrainingStarts(0, t0);
  Clock::time_point now = t0;
  for (int64_t step = 1; step <= 7; ++step) {
    now += milliseconds(500);
    report.Step(Step(step), now);
    if (step == 3) {  // 10 s of validation, left out of the next line's rate
      now += milliseconds(10000);
      report.Validation(ValidationReport{3, 2.25, std::nullopt, 4}, milliseconds(10000));
    }
  }
  REQUIRE(c.lines.size() == 4);
  // 3 steps of 100 tokens in 1.5 s; the last line covers step 7 alone.
  const std::string rest =
      " | loss 2.500000 | lr 1.000e-03 | loss scale 1 | grad norm 0.2500 | 200 tokens/s | 500.0 ms/step";
  CHECK(c.lines[0] == "step 3" + rest);
  CHECK(c.lines[1] == "step 3 | validation loss 2.250000 (4 batches per rank)");
  CHECK(c.lines[2] == "step 6" + rest);
  CHECK(c.lines[3] == "step 7" + rest);
  REQUIRE(c.bars.size() == 7);
  CHECK(c.bars[6].find("7/7 | loss 2.5000 | 200 tokens/s | done") != std::string::npos);
}

TEST_CASE("Step records keep the key order and 9 significant digits that readers match on") {
  Captured c;
  RunReport report = RunReport::ForRank(0, c.Outputs(), 10, 20);
  report.TrainingStarts(0, Clock::time_point{});
  StepReport step = Step(1, 0.003, 1000);
  step.loss = 2.0f / 3.0f;
  step.stats.lr = 0.176485032;    // nlohmann's own formatter writes 0.17648503199999999
  step.stats.loss_scale = 65536;  // and 65536.0
  step.stats.grad_norm = std::numeric_limits<double>::quiet_NaN();  // overflowed
  step.stats.skipped = true;
  report.Step(step, Clock::time_point{} + milliseconds(3));
  REQUIRE(c.records.size() == 1);
  CHECK(c.records[0] == "{\"event\":\"step\",\"step\":1,\"loss\":" + JsonNumber(2.0f / 3.0f) +
                            ",\"lr\":0.176485032,\"loss_scale\":65536,\"grad_norm\":null,\"skipped\":true,"
                            "\"tokens_per_s\":" + JsonNumber(1000 / 0.003) + ",\"ms_per_step\":3}");
  CHECK(c.records[0].rfind("{\"event\":\"step\",\"step\":1,", 0) == 0);
}

TEST_CASE("A step record's loss scale is exact past 9 digits, and a fractional static scale stays a number") {
  Captured c;
  RunReport report = RunReport::ForRank(0, c.Outputs(), 10, 20);
  report.TrainingStarts(0, Clock::time_point{});
  for (double scale : {1073741824.0, 18014398509481984.0, 0.5}) {  // 2^30, 2^54 (past a double's integers), 1/2
    StepReport step = Step(1);
    step.stats.loss_scale = scale;
    report.Step(step, Clock::time_point{} + milliseconds(3));
  }
  REQUIRE(c.records.size() == 3);
  CHECK(c.records[0].find(",\"loss_scale\":1073741824,") != std::string::npos);
  CHECK(c.records[1].find(",\"loss_scale\":1.80143985e+16,") != std::string::npos);
  CHECK(c.records[2].find(",\"loss_scale\":0.5,") != std::string::npos);
}

TEST_CASE("Step records end with every rank's step time and time in collectives when the loop gathered them") {
  Captured c;
  RunReport report = RunReport::ForRank(0, c.Outputs(), 10, 20);
  report.TrainingStarts(0, Clock::time_point{});
  StepReport step = Step(1, 0.003, 1000);
  step.rank_ms = {3.0, static_cast<double>(3.25f), std::numeric_limits<double>::infinity()};
  step.rank_collective_ms = {1.0, 0.5, 0.0};
  report.Step(step, Clock::time_point{} + milliseconds(3));
  REQUIRE(c.records.size() == 1);
  const std::string& r = c.records[0];
  CHECK(r.substr(r.find(",\"ms_per_step\"")) ==
        ",\"ms_per_step\":3,\"rank_step_ms\":[3,3.25,null],\"rank_collective_ms\":[1,0.5,0]}");
}

TEST_CASE("The first step's callback follows its record, once, with the step resumed from") {
  Captured c;
  RunReport report = RunReport::ForRank(0, c.Outputs(), 100, 20);
  report.TrainingStarts(8, Clock::time_point{});
  StepReport step = Step(9);
  step.stats.scale_event = "loss scale 65536 -> 32768 (overflow, step skipped)";
  report.Step(step, Clock::time_point{} + milliseconds(500));
  report.Step(Step(10), Clock::time_point{} + milliseconds(1000));
  CHECK(c.first_steps == std::vector<int64_t>{8});
  REQUIRE(c.events.size() >= 4);
  CHECK(c.events[0] == "record");
  CHECK(c.events[1] == "first");
  CHECK(c.events[2] == "print");
  CHECK(c.lines[0] == "step 9 | loss scale 65536 -> 32768 (overflow, step skipped)");
  CHECK(c.events[3] == "bar");
}

TEST_CASE("Start, resume, validation and end give the documented lines and records") {
  Captured c;
  RunReport report = RunReport::ForRank(0, c.Outputs(), 10, 20);
  report.Start(GptStart());
  LoadResult loaded;
  loaded.meta.step = 40;
  loaded.meta.world_size = 4;
  loaded.meta.zero_stage = 2;
  loaded.meta.precision = "bf16";
  loaded.bytes = 12345678;
  loaded.seconds = 0.25;
  loaded.warning = "the config changed";
  report.Resumed("ckpt/global_step40", loaded, /*restart=*/true);
  report.NoCheckpointYet("ckpt", /*restart=*/false);
  report.Validation(ValidationReport{40, 0.5, 0.9875, 2}, milliseconds(0));
  report.End(RunEnd{20, 19, MemoryStats{1, 2, 3, 4}, 2, 1, {}});
  REQUIRE(c.lines.size() == 4);
  CHECK(c.lines[0] == "model gpt: 1000000 parameters, 6.5e+06 FLOPs per token (forward + backward); per rank: "
                      "parameters 4.00 MB, gradients 2.00 MB, optimizer state 16.00 MB (ZeRO stage 1, fp16, world 2)");
  CHECK(c.lines[1] == "restart: resumed from ckpt/global_step40 at step 40 (saved by 4 ranks at ZeRO stage 2, bf16; "
                      "12.3 MB in 0.25 s); warning: the config changed");
  CHECK(c.lines[2] == "no checkpoint in ckpt yet: starting at step 0");
  CHECK(c.lines[3] == "step 40 | validation loss 0.500000 | accuracy 98.75% (2 batches per rank)");
  REQUIRE(c.records.size() == 4);
  CHECK(c.records[0] == "{\"event\":\"start\",\"model\":\"gpt\",\"parameters\":1000000,\"flops_per_token\":6500000,"
                        "\"world_size\":2,\"zero_stage\":1,\"precision\":\"fp16\",\"bytes_per_rank\":{\"parameters\":"
                        "4000000,\"gradients\":2000000,\"optimizer_state\":16000000,\"working\":123},"
                        "\"activation_bytes\":4096}");
  CHECK(c.records[1] ==
        "{\"event\":\"resume\",\"step\":40,\"saved_world_size\":4,\"saved_zero_stage\":2,\"load_seconds\":0.25,\"source\":\"disk\"}");
  CHECK(c.records[2] == "{\"event\":\"validation\",\"step\":40,\"val_loss\":0.5,\"accuracy\":0.9875}");
  CHECK(c.records[3] == "{\"event\":\"end\",\"steps\":20,\"applied_steps\":19,\"bytes_per_rank\":{\"parameters\":1,"
                        "\"gradients\":2,\"optimizer_state\":3,\"working\":4},\"checkpoints_saved\":2,"
                        "\"checkpoints_failed\":1}");
  for (const std::string& record : c.records) CHECK(nlohmann::json::accept(record));

  // A checkpoint of a grid says so, in the line and the record.
  Captured g;
  RunReport grid = RunReport::ForRank(0, g.Outputs(), 10, 40);
  loaded.meta.world_size = 8;
  loaded.meta.grid = {2, 2};
  loaded.warning.clear();
  grid.Resumed("ckpt/global_step40", loaded, /*restart=*/false);
  REQUIRE(g.lines.size() == 1);
  CHECK(g.lines[0] == "resumed from ckpt/global_step40 at step 40 (saved by 8 ranks as 2 stages x 2 data x 2 tensor "
                      "at ZeRO stage 2, bf16; 12.3 MB in 0.25 s)");
  REQUIRE(g.records.size() == 1);
  CHECK(g.records[0] == "{\"event\":\"resume\",\"step\":40,\"saved_world_size\":8,\"saved_zero_stage\":2,"
                        "\"saved_grid\":{\"pipeline\":2,\"data\":2,\"tensor\":2},\"load_seconds\":0.25,"
                        "\"source\":\"disk\"}");
}

TEST_CASE("The end record carries rank 0's swap I/O when any byte moved, and no swap_io key without") {
  Captured c;
  RunReport report = RunReport::ForRank(0, c.Outputs(), 1, 1);
  report.End(RunEnd{2, 2, MemoryStats{}, 0, 0, swap::IoStats{8192, 4096, 3, 2, 2}});
  report.End(RunEnd{2, 2, MemoryStats{}, 0, 0, swap::IoStats{}});
  REQUIRE(c.records.size() == 2);
  CHECK(c.records[0].ends_with(",\"swap_io\":{\"bytes_read\":8192,\"bytes_written\":4096,\"pieces\":3,"
                               "\"submit_calls\":2,\"max_in_flight\":2}}"));
  CHECK(c.records[1].find("swap_io") == std::string::npos);
}

TEST_CASE("A classifier counts samples, and a validation without accuracy records none") {
  Captured c;
  RunReport report = RunReport::ForRank(0, c.Outputs(), 1, 1);
  RunStart start = GptStart();
  start.model = "mlp";
  start.classifier = true;
  report.Start(start);
  report.TrainingStarts(0, Clock::time_point{});
  report.Step(Step(1), Clock::time_point{} + milliseconds(500));
  report.Validation(ValidationReport{1, 0.125, std::nullopt, 1}, milliseconds(0));
  CHECK(c.lines[0].find("FLOPs per sample") != std::string::npos);
  CHECK(c.lines[1].find("| 200 samples/s |") != std::string::npos);
  CHECK(c.records.back() == "{\"event\":\"validation\",\"step\":1,\"val_loss\":0.125}");
}

TEST_CASE("Empty summaries print nothing; the others print as given") {
  Captured c;
  RunReport report = RunReport::ForRank(0, c.Outputs(), 1, 1);
  report.CheckpointSummary("");
  report.Stopped(3);
  report.Sample("hello");
  report.CheckpointSummary("checkpoints: 1 saved, 0 failed; last complete: d/global_step3");
  CHECK(c.lines == std::vector<std::string>{"step 3 | stopped on request", "sample:\nhello",
                                            "checkpoints: 1 saved, 0 failed; last complete: d/global_step3"});
  CHECK(report.recorder());
}

TEST_CASE("The sample is printed and recorded with control bytes escaped and invalid UTF-8 replaced") {
  Captured c;
  RunReport report = RunReport::ForRank(0, c.Outputs(), 1, 1);
  report.Sample(std::string("ab\x1b[2Jc\0d\n\xC3(caf\xC3\xA9\x7f", 18));
  REQUIRE(c.lines.size() == 1);
  CHECK(c.lines[0] == "sample:\nab\\x1b[2Jc\\x00d\n\xEF\xBF\xBD(caf\xC3\xA9\\x7f");
  REQUIRE(c.records.size() == 1);
  CHECK(c.records[0] == "{\"event\":\"sample\",\"text\":\"ab\\\\x1b[2Jc\\\\x00d\\n\xEF\xBF\xBD(caf\xC3\xA9\\\\x7f\"}");
}

TEST_CASE("The start record carries the worker's start, its command line and its config; the exit record its end") {
  Captured c;
  RunReport report = RunReport::ForRank(0, c.Outputs(), 1, 1);
  RunStart start = GptStart();
  start.origin.command = {"dslaunch-worker", "train", "cfg.json"};
  start.origin.config_json = "{\"train_batch_size\": 8, \"lr\": 0.003}\n";
  start.origin.started_ms = 1764065700000;
  report.Start(start);
  REQUIRE(c.records.size() == 1);
  const std::string& r = c.records[0];
  CHECK(r.ends_with(",\"started_ms\":1764065700000,\"command\":[\"dslaunch-worker\",\"train\",\"cfg.json\"],"
                    "\"config\":{\"train_batch_size\":8,\"lr\":0.003}}"));
  // Without an origin (tests, older callers) the record is as before.
  Captured bare;
  RunReport plain = RunReport::ForRank(0, bare.Outputs(), 1, 1);
  plain.Start(GptStart());
  CHECK(bare.records[0].find("started_ms") == std::string::npos);
  CHECK(bare.records[0].find("command") == std::string::npos);
  CHECK(ExitRecordJson(1764065763250) == "{\"event\":\"exit\",\"ended_ms\":1764065763250}");
}

}  // namespace
}  // namespace dslaunch::runtime
