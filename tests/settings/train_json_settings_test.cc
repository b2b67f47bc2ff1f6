// Settings end to end for train.json (docs/testing.md, "Settings end to end"): each key is given in
// the file's text, which goes through ParseTrainConfig into Train() on in-process ranks, the path
// dslaunch-worker takes, and its effect is observed where it acts: in the step records (loss, lr,
// loss scale, grad norm), the validation and sample records, the start record, the printed lines.
//
// "Reaches the engine" rows compare three runs: the base file; the base file with the key; and the
// base file parsed, with the key's field set in C++ on the TrainConfig. The second must equal the
// third record for record (the value arrived exactly) and differ from the first (it acts). Besides
// rank 0's records and lines, a run observes what keys with no effect on the numbers change: the
// collectives rank 0 made (bucket and prefetch sizes), the swap files under the offload
// directories during the first step, the swap I/O and the engine's bytes (the end record).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "runtime/checkpoint/model_file.h"
#include "runtime/config/train_config.h"
#include "runtime/config/unimplemented_keys.h"
#include "runtime/swap/swap_file_name.h"
#include "tests/fakes/recording_communicator.h"
#include "tests/fakes/train_on_threads.h"
#include "tests/runtime/config/train_json_fixture.h"
#include "tests/support/subprocess.h"

namespace dslaunch::runtime::testing {
namespace {

using nlohmann::json;

// A tiny GPT that trains a few steps in milliseconds; every step printed and recorded.
json BaseDoc() {
  return json::parse(R"({
    "train_batch_size": 8,
    "train_micro_batch_size_per_gpu": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 3e-3}},
    "steps_per_print": 1,
    "seed": 5,
    "model": {"type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 16, "block_size": 8, "vocab_size": 32},
    "data": {"train": "train.bin"},
    "train": {"steps": 4, "eval_steps": 1}
  })");
}

TrainConfig Parsed(const json& doc, int world) {
  Result<TrainConfig> config = Parse(doc, world);
  REQUIRE_MESSAGE(config.ok(), config.status().message());
  config->source_sha256 = "test";
  return *config;
}

// What rank 0 recorded and printed, less what varies from run to run (times, rates, the command
// and the config's text).
struct Observed {
  std::vector<json> records;
  std::vector<std::string> lines;
  Status status;
  uint64_t submit_calls = 0;  // the end record's swap_io.submit_calls, kept out of `records`

  std::vector<json> Of(const std::string& kind) const {
    std::vector<json> out;
    for (const json& r : records) {
      if (r.value("event", "") == kind) out.push_back(r);
    }
    return out;
  }
  std::vector<double> Field(const std::string& kind, const std::string& field) const {
    std::vector<double> out;
    for (const json& r : Of(kind)) out.push_back(r.at(field).get<double>());
    return out;
  }
};

// The swap files under each of `dirs` (nvme_path values), without their pid: "a/param.rank0".
json SwapFiles(const std::vector<std::string>& dirs) {
  json files = json::array();
  for (const std::string& dir : dirs) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(swap::SwapDirectory(dir), ec)) {
      std::optional<swap::SwapFileName> name = swap::ParseSwapFileName(e.path().filename().string());
      if (!name) continue;
      files.push_back(std::filesystem::path(dir).filename().string() + "/" + std::string(swap::SwapKindName(name->kind)) +
                      ".rank" + std::to_string(name->rank));
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Train() on `world` threads, rank 0's records, lines and collectives observed. `swap_dirs`:
// directories whose swap files are listed at the first step record.
Observed Run(const TrainConfig& config, int world, const std::vector<std::string>& swap_dirs = {}) {
  Observed seen;
  std::optional<RecordingCommunicator> recorded;  // rank 0's, made on its thread
  auto results = TrainOnThreads(
      world, config, PatternTokens(true),
      [&](int rank) {
        TrainHooks hooks;
        if (rank != 0) return hooks;
        hooks.metrics = [&](const std::string& line) {
          json record = json::parse(line);
          for (const char* varies : {"tokens_per_s", "ms_per_step", "rank_step_ms", "rank_collective_ms",
                                     "started_ms", "ended_ms", "seconds", "load_seconds", "stall_seconds", "command",
                                     "config", "sgemm_gflops", "sgemm_default_gflops"}) {
            record.erase(varies);
          }
          // With the queue refilled as pieces complete, the count of submits depends on timing.
          if (record.contains("swap_io")) {
            seen.submit_calls = record["swap_io"]["submit_calls"].get<uint64_t>();
            record["swap_io"].erase("submit_calls");
          }
          if (record["event"] == "step" && record["step"] == 1 && !swap_dirs.empty()) {
            seen.records.push_back({{"event", "swap_files"}, {"files", SwapFiles(swap_dirs)}});
          }
          seen.records.push_back(record);
        };
        hooks.print = [&](const std::string& line) { seen.lines.push_back(line); };
        return hooks;
      },
      [&](int rank, Communicator& inner) -> Communicator& {
        if (rank != 0) return inner;
        recorded.emplace(inner);
        return *recorded;
      });
  seen.records.push_back({{"event", "collectives"}, {"calls", recorded->calls()}});
  seen.status = results[0].status();
  return seen;
}

Observed RunDoc(const json& doc, int world = 1, const std::vector<std::string>& swap_dirs = {}) {
  return Run(Parsed(doc, world), world, swap_dirs);
}

std::string Dump(const Observed& o) {
  std::string text;
  for (const json& r : o.records) text += r.dump() + "\n";
  return text;
}

// The printed lines less their rates: "step 1 | loss ... | grad norm 1.5564 | 105626 tokens/s | 0.6 ms/step".
std::vector<std::string> Steady(const std::vector<std::string>& lines) {
  static const std::regex kRates(R"( \| [0-9.e+]+ tokens/s \| [0-9.e+]+ ms/step)");
  std::vector<std::string> out;
  for (const std::string& line : lines) out.push_back(std::regex_replace(line, kRates, ""));
  return out;
}

// A key whose value must arrive in the engine exactly: the file with it, and the base with the
// field set in C++, give the same records, which differ from the base's.
struct EngineRow {
  std::string pointer;  // where the key goes in the base document
  json value;
  std::function<void(TrainConfig&)> set;  // the same value, set on the parsed base
  json base_patch = json::object();       // pointer -> value applied to the base first (e.g. SGD)
  int world = 1;
};

// Stage 3 with no persistent group: every parameter group is all-gathered when it is used.
json Stage3Gathered() {
  return {{"/zero_optimization", {{"stage", 3}, {"stage3_param_persistence_threshold", 0}}}};
}

std::vector<EngineRow> EngineRows() {
  auto sgd = json{{"/optimizer/type", "SGD"}, {"/optimizer/params/momentum", 0.9}};
  auto adam = json{{"/optimizer/type", "Adam"}, {"/optimizer/params/weight_decay", 0.1}};
  return {
      {"/optimizer/params/lr", 0.02, [](TrainConfig& c) { c.engine.optimizer.lr = 0.02; }},
      {"/optimizer/params/betas", {0.5, 0.9},
       [](TrainConfig& c) {
         c.engine.optimizer.beta1 = 0.5;
         c.engine.optimizer.beta2 = 0.9;
       }},
      {"/optimizer/params/eps", 0.5, [](TrainConfig& c) { c.engine.optimizer.eps = 0.5; }},
      {"/optimizer/params/weight_decay", 0.5, [](TrainConfig& c) { c.engine.optimizer.weight_decay = 0.5; }},
      {"/optimizer/params/bias_correction", false,
       [](TrainConfig& c) { c.engine.optimizer.bias_correction = false; }},
      {"/optimizer/params/adam_w_mode", false, [](TrainConfig& c) { c.engine.optimizer.kind = OptimizerKind::kAdam; }, adam},
      {"/optimizer/type", "SGD", [](TrainConfig& c) { c.engine.optimizer.kind = OptimizerKind::kSgd; }},
      {"/optimizer/params/momentum", 0.5, [](TrainConfig& c) { c.engine.optimizer.momentum = 0.5; }, sgd},
      {"/optimizer/params/dampening", 0.5, [](TrainConfig& c) { c.engine.optimizer.dampening = 0.5; }, sgd},
      {"/optimizer/params/nesterov", true, [](TrainConfig& c) { c.engine.optimizer.nesterov = true; }, sgd},
      {"/gradient_clipping", 0.05, [](TrainConfig& c) { c.engine.gradient_clipping = 0.05; }},
      {"/seed", 11, [](TrainConfig& c) { c.seed = 11; }},
      {"/fp16/enabled", true,
       [](TrainConfig& c) {
         c.engine.precision = Precision::kFp16;
       }},
      {"/bf16/enabled", true, [](TrainConfig& c) { c.engine.precision = Precision::kBf16; }},
      {"/bfloat16/enabled", true, [](TrainConfig& c) { c.engine.precision = Precision::kBf16; }},
      {"/fp16/initial_scale_power", 10, [](TrainConfig& c) { c.engine.loss_scaler.initial_scale_power = 10; },
       json{{"/fp16/enabled", true}}},
      {"/fp16/loss_scale", 128.0, [](TrainConfig& c) { c.engine.loss_scaler.loss_scale = 128.0; },
       json{{"/fp16/enabled", true}}},
      {"/fp16/loss_scale_window", 2, [](TrainConfig& c) { c.engine.loss_scaler.loss_scale_window = 2; },
       json{{"/fp16/enabled", true}}},
      {"/gradient_accumulation_steps", 2,
       [](TrainConfig& c) {
         c.batch.gradient_accumulation_steps = 2;
         c.batch.train_batch_size = 4;
       },
       json{{"/train_batch_size", nullptr}}},
      {"/train_micro_batch_size_per_gpu", 4,
       [](TrainConfig& c) {
         c.batch.micro_batch_per_gpu = 4;
         c.batch.gradient_accumulation_steps = 2;
       }},
      {"/train_batch_size", 4,
       [](TrainConfig& c) {
         c.batch.train_batch_size = 4;
         c.batch.gradient_accumulation_steps = 2;
       }},
      {"/model/n_layer", 1, [](TrainConfig& c) { std::get<GptConfig>(c.model).n_layer = 1; }},
      {"/model/n_embd", 32, [](TrainConfig& c) { std::get<GptConfig>(c.model).n_embd = 32; }},
      {"/model/n_head", 4, [](TrainConfig& c) { std::get<GptConfig>(c.model).n_head = 4; }},
      {"/model/vocab_size", 40, [](TrainConfig& c) { std::get<GptConfig>(c.model).vocab_size = 40; }},
      {"/model/block_size", 4,
       [](TrainConfig& c) {
         std::get<GptConfig>(c.model).block_size = 4;
         c.data.seq_len = 4;
       }},
      {"/data/seq_len", 4, [](TrainConfig& c) { c.data.seq_len = 4; }},
      {"/zero_optimization/stage", 2, [](TrainConfig& c) { c.engine.zero.stage = 2; }, json::object(), 2},
      {"/train/steps", 3, [](TrainConfig& c) { c.train.steps = 3; }},
      {"/train/eval_interval", 2, [](TrainConfig& c) { c.train.eval_interval = 2; }},
      {"/train/eval_steps", 3, [](TrainConfig& c) { c.train.eval_steps = 3; }},
      {"/train/sample_tokens", 5, [](TrainConfig& c) { c.train.sample_tokens = 5; }},
      // A byte-level vocabulary, so that the prompt and the sample are text.
      {"/train/sample_prompt", "ab", [](TrainConfig& c) { c.train.sample_prompt = "ab"; },
       json{{"/train/sample_tokens", 32}, {"/model/vocab_size", 256}}},
      {"/steps_per_print", 2, [](TrainConfig& c) { c.steps_per_print = 2; }},
      // Keys that change no loss: their effect is the engine's buffers, in the end record's bytes.
      {"/zero_optimization/reduce_bucket_size", 1000,
       [](TrainConfig& c) { c.engine.zero.reduce_bucket_size = 1000; }, json{{"/zero_optimization/stage", 2}}, 2},
      // A second bucket and its reduced part, filled while the first is reduced on the queue's thread.
      {"/zero_optimization/overlap_comm", true, [](TrainConfig& c) { c.engine.zero.overlap_comm = true; },
       json{{"/zero_optimization/stage", 2}}, 2},
      {"/zero_optimization/stage3_param_persistence_threshold", 1000,
       [](TrainConfig& c) { c.engine.zero.stage3_param_persistence_threshold = 1000; },
       json{{"/zero_optimization/stage", 3}}, 2},
      // Keys that change how the engine chunks its collectives: rank 0's all-gathers and the
      // working bytes. At stage 3 with no persistent group every parameter is gathered on demand.
      {"/zero_optimization/allgather_bucket_size", 300,
       [](TrainConfig& c) { c.engine.zero.allgather_bucket_size = 300; }, json{{"/zero_optimization/stage", 2}}, 2},
      {"/zero_optimization/stage3_prefetch_bucket_size", 300,
       [](TrainConfig& c) { c.engine.zero.stage3_prefetch_bucket_size = 300; }, Stage3Gathered(), 2},
      {"/zero_optimization/stage3_max_live_parameters", 300,
       [](TrainConfig& c) { c.engine.zero.stage3_max_live_parameters = 300; }, Stage3Gathered(), 2},
      // Recomputation keeps fewer activations: the start record's activation_bytes.
      {"/activation_checkpointing/number_checkpoints", 1,
       [](TrainConfig& c) { std::get<GptConfig>(c.model).recompute_blocks = 1; },
       json{{"/activation_checkpointing", json::object()}}},
  };
}

// Optimizer state and parameters in swap files under DIR/a, in 4 KiB pieces, every parameter group
// on disk (none persistent, none kept in memory by max_in_cpu).
json OffloadPatch(const std::string& dir) {
  const json nvme = {{"device", "nvme"}, {"nvme_path", dir + "/a"}};
  json param = nvme;
  param["max_in_cpu"] = 0;
  return {{"/zero_optimization", {{"stage", 3},
                                  {"stage3_param_persistence_threshold", 0},
                                  {"offload_optimizer", nvme},
                                  {"offload_param", param}}},
          {"/aio", {{"block_size", 4096}}}};
}

// `patch` (pointer -> value) with `more`'s pointers added or replaced.
json Patched(json patch, const json& more) {
  patch.update(more);
  return patch;
}

// `doc` with each pointer of `patch` set to its value, or its top-level key removed when the value
// is null. Pointers are applied in sorted order, so a section comes before a key inside it.
json Applied(json doc, const json& patch) {
  for (const auto& [pointer, value] : patch.items()) {
    if (value.is_null()) {
      doc.erase(pointer.substr(1));
    } else {
      doc = With(doc, pointer, value);
    }
  }
  return doc;
}

// The offload and aio keys: their effect is in the end record's swap_io and bytes, or in where the
// swap files are.
std::vector<EngineRow> OffloadRows(const std::string& dir) {
  const json base = OffloadPatch(dir);
  return {
      {"/aio/block_size", 8192, [](TrainConfig& c) { c.engine.aio.block_size = 8192; }, base, 2},
      {"/aio/queue_depth", 2, [](TrainConfig& c) { c.engine.aio.queue_depth = 2; }, base, 2},
      {"/zero_optimization/sub_group_size", 1000, [](TrainConfig& c) { c.engine.zero.sub_group_size = 1000; }, base,
       2},
      {"/zero_optimization/offload_optimizer/buffer_count", 2,
       [](TrainConfig& c) { c.engine.offload_optimizer.buffer_count = 2; }, base, 2},
      {"/zero_optimization/offload_param/buffer_count", 2,
       [](TrainConfig& c) { c.engine.offload_param.buffer_count = 2; }, base, 2},
      {"/zero_optimization/offload_param/max_in_cpu", 1000,
       [](TrainConfig& c) { c.engine.offload_param.max_in_cpu = 1000; }, base, 2},
      {"/zero_optimization/offload_param/nvme_path", dir + "/b",
       [dir](TrainConfig& c) { c.engine.offload_param.nvme_path = dir + "/b"; }, base, 2},
      {"/zero_optimization/offload_param/device", "nvme",
       [](TrainConfig& c) { c.engine.offload_param.device = swap::OffloadDevice::kNvme; },
       Patched(base, {{"/zero_optimization/offload_param/device", "none"}}), 2},
  };
}

void CheckReachesEngine(const std::vector<EngineRow>& rows, const std::vector<std::string>& swap_dirs = {}) {
  for (const EngineRow& row : rows) {
    INFO(row.pointer << " = " << row.value.dump());
    const json base = Applied(BaseDoc(), row.base_patch);
    const Observed without = RunDoc(base, row.world, swap_dirs);
    const Observed in_file = RunDoc(With(base, row.pointer, row.value), row.world, swap_dirs);
    TrainConfig direct = Parsed(base, row.world);
    row.set(direct);
    const Observed in_code = Run(direct, row.world, swap_dirs);
    REQUIRE_MESSAGE(in_file.status.ok(), in_file.status.message());
    REQUIRE(in_code.status.ok());
    CHECK(Dump(in_file) == Dump(in_code));
    CHECK(Steady(in_file.lines) == Steady(in_code.lines));
    CHECK((Dump(in_file) != Dump(without) || Steady(in_file.lines) != Steady(without.lines)));
  }
}

TEST_CASE("Every train.json key given in the file reaches the engine: the same records as the field set in C++, "
          "others than without it") {
  CheckReachesEngine(EngineRows());
}

TEST_CASE("Every offload and aio key given in the file reaches the swap: the same records, swap I/O and swap files "
          "as the field set in C++, others than without it") {
  dslaunch::testing::TempDir dir("/var/tmp");
  for (const char* sub : {"/a", "/b"}) std::filesystem::create_directory(dir.path() + sub);
  CheckReachesEngine(OffloadRows(dir.path()), {dir.path() + "/a", dir.path() + "/b"});

  // swap_io counts both files: the parameters' I/O comes on top of the optimizer state's.
  const json both = Applied(BaseDoc(), OffloadPatch(dir.path()));
  const json state_only = With(both, "/zero_optimization/offload_param/device", "none");
  const json io_both = RunDoc(both, 2).Of("end").at(0).at("swap_io");
  const json io_state = RunDoc(state_only, 2).Of("end").at(0).at("swap_io");
  CHECK(io_both.at("bytes_read").get<uint64_t>() > io_state.at("bytes_read").get<uint64_t>());
  CHECK(io_both.at("bytes_written").get<uint64_t>() > io_state.at("bytes_written").get<uint64_t>());
}

TEST_CASE("aio.single_submit and aio.overlap_events given in the file change how the swap I/O is submitted") {
  dslaunch::testing::TempDir dir("/var/tmp");
  std::filesystem::create_directory(dir.path() + "/a");
  json base = Applied(BaseDoc(), OffloadPatch(dir.path()));
  // 64 pieces of 4 KiB in each optimizer record: the queue of 8 refills many times per transfer.
  base["model"]["n_embd"] = 64;
  auto pieces = [](const Observed& o) { return o.Of("end").at(0).at("swap_io").at("pieces").get<uint64_t>(); };
  const Observed refilled = RunDoc(base, 2);
  const Observed single = RunDoc(With(base, "/aio/single_submit", true), 2);
  const Observed batched = RunDoc(With(base, "/aio/overlap_events", false), 2);
  for (const Observed* o : {&refilled, &single, &batched}) REQUIRE_MESSAGE(o->status.ok(), o->status.message());
  INFO("pieces " << pieces(refilled) << ", submits " << refilled.submit_calls << " refilled, " << single.submit_calls
                 << " single, " << batched.submit_calls << " batched");
  CHECK(pieces(single) == pieces(refilled));
  CHECK(pieces(batched) == pieces(refilled));
  // Defaults: every piece that fits goes out in one submit, and the queue is refilled as each
  // completes (about a submit per piece once the queue is full).
  CHECK(refilled.submit_calls < pieces(refilled));
  CHECK(refilled.submit_calls * 2 > pieces(refilled));
  CHECK(single.submit_calls == pieces(single));  // one submit per piece
  // Batches of up to queue_depth 8 pieces, each completed before the next.
  CHECK(batched.submit_calls * 4 < pieces(batched));
}

TEST_CASE("zero_optimization.offload_param.buffer_size given in the file bounds the partition the swap accepts, as "
          "the field set in C++ does") {
  dslaunch::testing::TempDir dir("/var/tmp");
  std::filesystem::create_directory(dir.path() + "/a");
  json base = Applied(BaseDoc(), OffloadPatch(dir.path()));
  REQUIRE(RunDoc(base, 2).status.ok());
  const Observed in_file = RunDoc(With(base, "/zero_optimization/offload_param/buffer_size", 300), 2);
  TrainConfig direct = Parsed(base, 2);
  direct.engine.offload_param.buffer_size = 300;
  const Observed in_code = Run(direct, 2);
  CHECK(in_file.status.message() == in_code.status.message());
  CHECK(in_file.status.message().find("zero_optimization.offload_param.buffer_size: 300 elements cannot hold this "
                                      "rank's largest parameter partition") != std::string::npos);
}

TEST_CASE("optimizer.params.lr without a scheduler is the rate of every step") {
  const Observed o = RunDoc(With(BaseDoc(), "/optimizer/params/lr", 0.02));
  REQUIRE(o.status.ok());
  CHECK(o.Field("step", "lr") == std::vector<double>(4, 0.02));
}

// Each step's rate of a run of `steps` steps with `scheduler` (the section's JSON text).
std::vector<double> Rates(int64_t steps, const char* scheduler, double lr = 3e-3) {
  json doc = BaseDoc();
  doc["train"]["steps"] = steps;
  doc["optimizer"]["params"]["lr"] = lr;
  doc["scheduler"] = json::parse(scheduler);
  const Observed o = RunDoc(doc);
  REQUIRE_MESSAGE(o.status.ok(), o.status.message());
  std::vector<double> rates = o.Field("step", "lr");
  REQUIRE(rates.size() == static_cast<size_t>(steps));
  return rates;
}

void CheckRates(const std::vector<double>& rates, const std::vector<double>& expected) {
  REQUIRE(rates.size() == expected.size());
  for (size_t i = 0; i < rates.size(); ++i) {
    CAPTURE(i);
    CHECK(rates[i] == doctest::Approx(expected[i]).epsilon(1e-12));
  }
}

TEST_CASE("The scheduler's rate at each step: WarmupLR linear from warmup_min_lr to warmup_max_lr over "
          "warmup_num_steps, the first step at the bottom (DeepSpeed's iteration -1)") {
  // Step k applies iteration k - 2: -1 (the bottom), then 0/4, 1/4, 2/4, 3/4 of the way, then the top.
  CheckRates(Rates(7, R"({"type": "WarmupLR", "params": {"warmup_min_lr": 0.01, "warmup_max_lr": 0.05,
                         "warmup_num_steps": 4, "warmup_type": "linear"}})"),
             {0.01, 0.01, 0.02, 0.03, 0.04, 0.05, 0.05});
}

TEST_CASE("The scheduler's rate at each step: WarmupDecayLR decays linearly to 0 at total_num_steps") {
  // Iterations -1, 0, 1 warm up (0, 0, 0.02); from iteration 2 the rate falls by 0.04/4 a step.
  CheckRates(Rates(6, R"({"type": "WarmupDecayLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 0.04,
                         "warmup_num_steps": 2, "warmup_type": "linear", "total_num_steps": 6}})"),
             {0.0, 0.0, 0.02, 0.04, 0.03, 0.02});
}

TEST_CASE("The scheduler's rate at each step: WarmupCosineLR scales lr from warmup_min_ratio up, then down a "
          "cosine to cos_min_ratio at total_num_steps") {
  const std::vector<double> lr = Rates(6, R"({"type": "WarmupCosineLR", "params": {"warmup_min_ratio": 0.2,
                                            "cos_min_ratio": 0.1, "warmup_num_steps": 2, "warmup_type": "linear",
                                            "total_num_steps": 6}})",
                                       0.1);
  CHECK(lr[0] == 0.0);  // iteration -1: DeepSpeed's WarmupCosineLR gives 0 before its first step
  // The warm-up: ratio 0.2 at iteration 0, halfway to 1 at iteration 1.
  CHECK(lr[1] == doctest::Approx(0.1 * 0.2));
  CHECK(lr[2] == doctest::Approx(0.1 * 0.6));
  // The cosine after the warm-up, to total_num_steps 6 (ratio 0.1): iteration i >= 2 is
  // 0.1 + 0.9 * (1 + cos(pi * (i - 2 + 1) / 4)) / 2 of lr (DeepSpeed counts the first step after
  // the warm-up as step 1 of the cosine).
  for (int i = 2; i <= 4; ++i) {
    const double ratio = 0.1 + 0.9 * (1 + std::cos(M_PI * (i - 2 + 1) / 4.0)) / 2;
    CHECK(lr[static_cast<size_t>(i + 1)] == doctest::Approx(0.1 * ratio));
  }
}

TEST_CASE("The scheduler's warmup_type log rises as ln(iteration + 1) / ln(warmup_num_steps)") {
  const std::vector<double> lr = Rates(5, R"({"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 0.08,
                                            "warmup_num_steps": 4, "warmup_type": "log"}})");
  for (int i = 0; i < 4; ++i) {
    CHECK(lr[static_cast<size_t>(i + 1)] == doctest::Approx(0.08 * std::log(i + 1.0) / std::log(4.0)));
  }
}

TEST_CASE("fp16: initial_scale_power is the first step's loss scale, loss_scale_window good steps double it, and "
          "a static loss_scale holds") {
  json doc = With(BaseDoc(), "/fp16", json::parse(R"({"enabled": true, "initial_scale_power": 9,
                                                      "loss_scale_window": 2})"));
  doc["train"]["steps"] = 5;
  const Observed o = RunDoc(doc);
  REQUIRE(o.status.ok());
  // The scale doubles on the (window + 1)-th clean step, as DeepSpeed's current DynamicLossScaler.
  CHECK(o.Field("step", "loss_scale") == std::vector<double>{512, 512, 512, 1024, 1024});
  const Observed fixed = RunDoc(With(doc, "/fp16/loss_scale", 64.0));
  REQUIRE(fixed.status.ok());
  CHECK(fixed.Field("step", "loss_scale") == std::vector<double>(5, 64));
}

TEST_CASE("fp16: hysteresis overflows are skipped at the same scale before it halves, and min_loss_scale ends a "
          "run that overflows at it") {
  // 2^30 overflows fp16 in this model's backward: the scaler halves until it fits.
  json doc = With(BaseDoc(), "/fp16", json::parse(R"({"enabled": true, "initial_scale_power": 30,
                                                      "hysteresis": 1})"));
  doc["train"]["steps"] = 3;
  const Observed once = RunDoc(doc);
  REQUIRE(once.status.ok());
  const Observed twice = RunDoc(With(doc, "/fp16/hysteresis", 3));
  REQUIRE(twice.status.ok());
  const std::vector<double> scale1 = once.Field("step", "loss_scale");
  const std::vector<double> scale3 = twice.Field("step", "loss_scale");
  REQUIRE(scale1.size() >= 2);
  REQUIRE(scale3.size() >= 3);
  
  CHECK(scale1[1] == scale1[0] / 2);  // hysteresis 1: halved at the first overflow
  CHECK(scale3[1] == scale3[0]);      // hysteresis 3: the first two overflows keep the scale
  CHECK(scale3[2] == scale3[0]);
  const Observed floor = RunDoc(With(doc, "/fp16/min_loss_scale", 1073741824.0));
  CHECK_FALSE(floor.status.ok());
  CHECK(floor.status.message().find("overflow even at fp16.min_loss_scale") != std::string::npos);
}

TEST_CASE("deepspeed_config: the referenced file's keys reach the engine as the same keys inline do") {
  dslaunch::testing::TempDir dir;
  const json keys = json::parse(R"({"gradient_clipping": 0.05, "optimizer": {"type": "AdamW", "params": {"lr": 0.02}},
                                    "train_batch_size": 4})");
  std::ofstream(dir.path() + "/ds.json") << keys.dump();
  json doc = BaseDoc();
  for (const char* moved : {"optimizer", "train_batch_size"}) doc.erase(moved);
  doc["deepspeed_config"] = "ds.json";
  std::ofstream(dir.path() + "/train.json") << doc.dump();
  Result<TrainConfig> referenced = ReadTrainConfig(dir.path() + "/train.json", 1);
  REQUIRE_MESSAGE(referenced.ok(), referenced.status().message());
  referenced->source_sha256 = "test";
  const Observed via_file = Run(*referenced, 1);
  json inline_doc = BaseDoc();
  inline_doc.update(keys);
  const Observed in_line = RunDoc(inline_doc);
  REQUIRE(via_file.status.ok());
  CHECK(Dump(via_file) == Dump(in_line));
  CHECK(Dump(via_file) != Dump(RunDoc(BaseDoc())));
}

TEST_CASE("model.init_from given in the file starts the run from those weights, as the field set in C++ does") {
  dslaunch::testing::TempDir dir;
  json trained = BaseDoc();
  trained["checkpoint"] = {{"dir", dir.path() + "/ckpt"}};
  REQUIRE(RunDoc(trained).status.ok());
  const std::string weights = dir.path() + "/model.safetensors";
  REQUIRE(ExportCheckpoint(dir.path() + "/ckpt", weights, DType::kFloat32).ok());

  const Observed in_file = RunDoc(With(BaseDoc(), "/model/init_from", weights));
  TrainConfig direct = Parsed(BaseDoc(), 1);
  direct.model_init_from = weights;
  const Observed in_code = Run(direct, 1);
  REQUIRE_MESSAGE(in_file.status.ok(), in_file.status.message());
  CHECK(Dump(in_file) == Dump(in_code));
  CHECK(Dump(in_file) != Dump(RunDoc(BaseDoc())));
  CHECK(std::find(in_file.lines.begin(), in_file.lines.end(), "model initialised from " + weights) !=
        in_file.lines.end());
}

TEST_CASE("checkpoint.keep_last keeps that many newest checkpoints of checkpoint.dir, saved every checkpoint.interval") {
  for (int keep : {0, 2}) {
    CAPTURE(keep);
    dslaunch::testing::TempDir dir;
    json doc = BaseDoc();
    doc["checkpoint"] = {{"dir", dir.path() + "/ckpt"}, {"interval", 1}};
    if (keep > 0) doc["checkpoint"]["keep_last"] = keep;
    REQUIRE(RunDoc(doc).status.ok());
    std::vector<std::string> kept;
    for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/ckpt")) {
      if (e.is_directory()) kept.push_back(e.path().filename().string());
    }
    std::sort(kept.begin(), kept.end());
    CHECK(kept == (keep == 0 ? std::vector<std::string>{"global_step1", "global_step2", "global_step3", "global_step4"}
                             : std::vector<std::string>{"global_step3", "global_step4"}));
  }
}

TEST_CASE("Every recognised-but-unimplemented DeepSpeed key given in the file is named in the start-up warning") {
  size_t keys = 0;
  for (const internal::UnimplementedKey& entry : internal::UnimplementedKeys()) {
    const std::string section(entry.section);
    const std::string key(entry.key);
    INFO(section << "." << key);
    std::string pointer = section.substr(1);  // "$.a.b" -> ".a.b"
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    json doc = BaseDoc();
    if (pointer.starts_with("/bf16")) doc["bf16"]["enabled"] = true;
    if (pointer.starts_with("/scheduler")) doc["scheduler"]["type"] = "WarmupLR";
    doc[json::json_pointer(pointer + "/" + key)] = entry.only.empty() ? json(true) : json::parse(entry.only);
    Result<TrainConfig> config = Parse(doc, 1);
    REQUIRE_MESSAGE(config.ok(), config.status().message());
    CHECK(UnimplementedWarning(*config).find(section + "." + key) != std::string::npos);
    ++keys;
  }
  CHECK(keys >= 50);
}

TEST_CASE("Keys this runtime accepts without an effect say so at start-up, each naming its key") {
  struct Case {
    const char* pointer;
    json value;
    json base_patch = json::object();  // pointer -> value applied to the base first
  };
  // pin_memory is noted where an offload device is given ("cpu": nothing moves here either).
  const json cpu_state = {{"/zero_optimization/offload_optimizer/device", "cpu"}};
  const json cpu_params = {{"/zero_optimization/stage", 3}, {"/zero_optimization/offload_param/device", "cpu"}};
  for (const Case& c : std::vector<Case>{{"/activation_checkpointing/partition_activations", true},
                                         {"/activation_checkpointing/cpu_checkpointing", true},
                                         {"/activation_checkpointing/contiguous_memory_optimization", true},
                                         {"/activation_checkpointing/synchronize_checkpoint_boundary", true},
                                         {"/activation_checkpointing/profile", true},
                                         {"/aio/intra_op_parallelism", 4},
                                         {"/aio/thread_count", 4},
                                         {"/zero_optimization/offload_optimizer/pin_memory", true, cpu_state},
                                         {"/zero_optimization/offload_param/pin_memory", true, cpu_params}}) {
    INFO(std::string(c.pointer));
    Result<TrainConfig> config = Parse(With(Applied(BaseDoc(), c.base_patch), c.pointer, c.value), 1);
    REQUIRE_MESSAGE(config.ok(), config.status().message());
    std::string path = std::string("$") + c.pointer;
    std::replace(path.begin(), path.end(), '/', '.');
    std::string warnings;
    for (const std::string& w : config->warnings) warnings += w + "\n";
    CHECK_MESSAGE(warnings.find("train.json: " + path + ": ") != std::string::npos, warnings);
  }
}

}  // namespace
}  // namespace dslaunch::runtime::testing
