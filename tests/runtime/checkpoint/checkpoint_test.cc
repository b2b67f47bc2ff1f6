// Checkpoints through the training loop with the in-process communicator and real files: exact
// resume, resume on another world size and ZeRO stage, corrupt shards, `latest` and retention.
#include "runtime/checkpoint/checkpoint.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "common/crc32c.h"
#include "runtime/checkpoint/fault_injecting_file_system.h"
#include "runtime/checkpoint/model_file.h"
#include "runtime/checkpoint/names.h"
#include "runtime/train/trainer.h"
#include "tests/fakes/train_on_threads.h"
#include "tests/runtime/tiny_gpt_config.h"
#include "tests/support/subprocess.h"

namespace dslaunch::runtime {
namespace {

namespace fs = std::filesystem;

TrainConfig Config(int world, int stage, int64_t steps) { return TinyGptConfig(world, stage, steps); }

// The file system of each rank's checkpoint saves (null: the real one).
using FilesOfRank = std::function<FileSystem*(int rank)>;

// Runs `config` on `world` threads; returns every rank's result.
std::vector<Result<TrainResult>> RunRanks(int world, const TrainConfig& config, const FilesOfRank& files = {},
                                          std::vector<std::string>* lines = nullptr) {
  return testing::TrainOnThreads(world, config, testing::PatternTokens(/*validation=*/false), [&](int r) {
    TrainHooks hooks;
    hooks.print = [lines](const std::string& l) {
      if (lines != nullptr) lines->push_back(l);
    };
    if (files) hooks.checkpoint_files = files(r);
    return hooks;
  });
}

// Rank 0's result.
Result<TrainResult> Run(int world, const TrainConfig& config, const FilesOfRank& files = {},
                        std::vector<std::string>* lines = nullptr) {
  return RunRanks(world, config, files, lines)[0];
}

// A fault at `point` of the save of `step` on `rank` that makes a directory stand where the shard
// file goes, so that creating the shard fails.
FaultInjectingFileSystem ShardBlockedBy(int rank, int64_t step) {
  return FaultInjectingFileSystem(LocalFileSystem(), {SaveFaultPoint::kBeforeShard, rank, step},
                                  [rank](SaveFaultPoint, const std::string& step_dir) {
                                    fs::create_directories(fs::path(step_dir) / ShardFileName(rank));
                                    return Status::Ok();
                                  });
}

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_CASE("A run resumed from a checkpoint at the same world size and stage has bitwise the same losses") {
  for (auto [stage, precision] : {std::pair{1, Precision::kFp32}, {2, Precision::kFp16}, {3, Precision::kBf16}, {0, Precision::kFp32}}) {
    CAPTURE(stage);
    CAPTURE(PrecisionName(precision));
    dslaunch::testing::TempDir dir;
    TrainConfig c = Config(2, stage, 10);
    c.engine.precision = precision;
    c.checkpoint.dir = dir.path() + "/ckpt";
    c.checkpoint.interval = 4;
    auto full = Run(2, c);
    REQUIRE_MESSAGE(full.ok(), full.status().ToString());
    REQUIRE(full->losses.size() == 10);
    // Saved at 4 and 8 (interval) and 10 (end); `latest` names the last.
    REQUIRE(full->checkpoints.size() == 3);
    CHECK(Slurp(fs::path(c.checkpoint.dir) / "latest") == "global_step10\n");

    TrainConfig resumed = c;
    resumed.checkpoint.load = CheckpointLoad::kPath;
    resumed.checkpoint.load_path = c.checkpoint.dir + "/global_step4";
    resumed.checkpoint.dir = dir.path() + "/ckpt2";
    auto rest = Run(2, resumed);
    REQUIRE_MESSAGE(rest.ok(), rest.status().ToString());
    CHECK(rest->first_step == 4);
    REQUIRE(rest->losses.size() == 6);
    for (size_t i = 0; i < 6; ++i) {
      CAPTURE(i);
      CHECK(rest->losses[i] == full->losses[4 + i]);  // bitwise
    }
  }
}

TEST_CASE("Asynchronous saves give the same checkpoints; a failed one is reported and training goes on") {
  dslaunch::testing::TempDir dir;
  TrainConfig c = Config(2, 2, 8);
  c.checkpoint.dir = dir.path() + "/sync";
  c.checkpoint.interval = 2;
  auto sync = Run(2, c);
  REQUIRE(sync.ok());
  c.checkpoint.dir = dir.path() + "/async";
  c.checkpoint.async = true;
  std::vector<std::string> lines;
  auto async = Run(2, c, {}, &lines);
  REQUIRE_MESSAGE(async.ok(), async.status().ToString());
  CHECK(async->losses == sync->losses);  // saving in the background changes nothing
  REQUIRE(async->checkpoints.size() == 4);
  for (int step : {2, 4, 6, 8}) {
    const std::string name = "global_step" + std::to_string(step);
    CHECK(Slurp(fs::path(c.checkpoint.dir) / name / "meta.json") ==
          Slurp(fs::path(dir.path()) / "sync" / name / "meta.json"));
    // The shards are byte for byte those of the synchronous saves.
    for (const char* shard : {"rank00000.safetensors", "rank00001.safetensors"}) {
      CHECK(Slurp(fs::path(c.checkpoint.dir) / name / shard) == Slurp(fs::path(dir.path()) / "sync" / name / shard));
    }
  }
  CHECK(Slurp(fs::path(c.checkpoint.dir) / "latest") == "global_step8\n");

  // Rank 1's shard of step 4 cannot be written (a directory stands where the file goes): reported,
  // and training and the later saves go on.
  c.checkpoint.dir = dir.path() + "/failing";
  lines.clear();
  FaultInjectingFileSystem blocked = ShardBlockedBy(1, 4);
  auto failing = Run(2, c, [&](int r) { return r == 1 ? &blocked : nullptr; }, &lines);
  REQUIRE_MESSAGE(failing.ok(), failing.status().ToString());
  CHECK(failing->losses == sync->losses);
  CHECK(failing->checkpoints.size() == 3);
  bool reported = false;
  for (const auto& l : lines) reported |= l.rfind("step 4 | checkpoint FAILED", 0) == 0;
  CHECK(reported);
  // The failed save's partial directory is gone (before: it stayed, half written).
  CHECK_FALSE(fs::exists(fs::path(c.checkpoint.dir) / "global_step4"));
  CHECK(Slurp(fs::path(c.checkpoint.dir) / "latest") == "global_step8\n");
  // Counted, and reported at the end (before: neither).
  CHECK(failing->failed_checkpoints == std::vector<int64_t>{4});
  CHECK(std::find(lines.begin(), lines.end(), "checkpoints: 3 saved, 1 failed (step 4); last complete: " +
                                                  c.checkpoint.dir + "/global_step8") != lines.end());
}

// Runs `config` on 2 threads with rank 1's shard of step `failing_step` made unwritable (a
// directory where the file goes), and `stop` as every rank's stop flag; returns both ranks'
// results and rank 0's metrics records.
std::vector<Result<TrainResult>> RunWithFailingShard(const TrainConfig& config, int64_t failing_step,
                                                     const std::atomic<bool>* stop, std::vector<std::string>* metrics) {
  FaultInjectingFileSystem blocked = ShardBlockedBy(1, failing_step);
  return testing::TrainOnThreads(2, config, testing::PatternTokens(/*validation=*/false), [&](int r) {
    TrainHooks hooks;
    hooks.stop = stop;
    if (r == 0) hooks.metrics = [metrics](const std::string& m) { metrics->push_back(m); };
    if (r == 1) hooks.checkpoint_files = &blocked;
    return hooks;
  });
}

TEST_CASE("A failed end-of-run save fails the run on every rank, naming the save, even when saves are asynchronous") {
  // Before: with async the save at the last step was a background save, and its failure was
  // printed while the run ended with success: steps 7-8 were lost silently.
  for (bool async : {true, false}) {
    CAPTURE(async);
    dslaunch::testing::TempDir dir;
    TrainConfig c = Config(2, 2, 8);
    c.checkpoint.dir = dir.path() + "/ckpt";
    c.checkpoint.interval = 2;
    c.checkpoint.async = async;
    std::vector<std::string> metrics;
    auto results = RunWithFailingShard(c, 8, nullptr, &metrics);
    const std::string kept = "; the last complete checkpoint is " + c.checkpoint.dir + "/global_step6 (step 6), so " +
                             "steps 7-8 are not saved";
    REQUIRE_FALSE(results[1].ok());
    CHECK(results[1].status().message().rfind("the end-of-run checkpoint of step 8 in " + c.checkpoint.dir +
                                                  " failed: checkpoint of step 8: ", 0) == 0);
    CHECK(results[1].status().message().find("rank00001.safetensors") != std::string::npos);
    CHECK(results[1].status().message().ends_with(kept));
    REQUIRE_FALSE(results[0].ok());
    CHECK(results[0].status().message() == "the end-of-run checkpoint of step 8 in " + c.checkpoint.dir +
                                               " failed: checkpoint of step 8: rank 1 could not write its shard; " +
                                               c.checkpoint.dir + "/latest still names the previous checkpoint" + kept);
    CHECK(Slurp(fs::path(c.checkpoint.dir) / "latest") == "global_step6\n");
    CHECK_FALSE(fs::exists(fs::path(c.checkpoint.dir) / "global_step8"));  // rank 0 removed the partial save
    CHECK(fs::exists(fs::path(c.checkpoint.dir) / "global_step6" / "meta.json"));
    CHECK(metrics.back() == "{\"event\":\"checkpoint_failed\",\"step\":8,\"final\":true}");
  }
}

TEST_CASE("A failed save on stop fails the run, naming the save") {
  // Before: with async the save on stop was started in the background and its failure printed;
  // the run reported a clean stop.
  dslaunch::testing::TempDir dir;
  TrainConfig c = Config(2, 2, 100);
  c.checkpoint.dir = dir.path() + "/ckpt";
  c.checkpoint.async = true;
  const std::atomic<bool> stop{true};  // told to stop during step 1
  std::vector<std::string> metrics;
  auto results = RunWithFailingShard(c, 1, &stop, &metrics);
  REQUIRE_FALSE(results[0].ok());
  CHECK(results[0].status().message() == "the checkpoint on stop of step 1 in " + c.checkpoint.dir +
                                             " failed: checkpoint of step 1: rank 1 could not write its shard; " +
                                             c.checkpoint.dir + "/latest still names the previous checkpoint" +
                                             "; no checkpoint of this run is complete, so steps 1-1 are not saved");
  REQUIRE_FALSE(results[1].ok());
  // The same stop with a writable directory saves and stops cleanly.
  auto clean = RunWithFailingShard(c, -1, &stop, &metrics);
  REQUIRE_MESSAGE(clean[0].ok(), clean[0].status().ToString());
  CHECK(clean[0]->stopped);
  CHECK(clean[0]->checkpoints == std::vector<std::string>{c.checkpoint.dir + "/global_step1"});
}

TEST_CASE("A checkpoint resumes on another world size and ZeRO stage with the losses of the uninterrupted run") {
  struct Case {
    int from_world, from_stage, to_world, to_stage;
  };
  for (Case k : {Case{4, 1, 2, 1}, Case{2, 1, 4, 1}, Case{2, 2, 2, 3}, Case{4, 3, 1, 0}, Case{1, 0, 4, 2}}) {
    CAPTURE(k.from_world);
    CAPTURE(k.from_stage);
    CAPTURE(k.to_world);
    CAPTURE(k.to_stage);
    dslaunch::testing::TempDir dir;
    TrainConfig c = Config(k.from_world, k.from_stage, 12);
    c.checkpoint.dir = dir.path() + "/ckpt";
    c.checkpoint.interval = 6;
    auto full = Run(k.from_world, c);
    REQUIRE_MESSAGE(full.ok(), full.status().ToString());

    TrainConfig other = Config(k.to_world, k.to_stage, 12);
    other.checkpoint.load = CheckpointLoad::kPath;
    other.checkpoint.load_path = c.checkpoint.dir + "/global_step6";
    auto rest = Run(k.to_world, other);
    REQUIRE_MESSAGE(rest.ok(), rest.status().ToString());
    CHECK(rest->first_step == 6);
    REQUIRE(rest->losses.size() == 6);
    for (size_t i = 0; i < 6; ++i) {
      CAPTURE(i);
      // fp32: the runtime issue's bound for another world size or stage.
      CHECK(std::abs(rest->losses[i] - full->losses[6 + i]) <= 1e-5 * std::abs(full->losses[6 + i]));
    }
  }
}

TEST_CASE("model.init_from starts a fresh run from exported weights; a checkpoint being resumed wins") {
  dslaunch::testing::TempDir dir;
  TrainConfig c = Config(2, 1, 8);
  c.checkpoint.dir = dir.path() + "/ckpt";
  auto trained = Run(2, c);
  REQUIRE(trained.ok());
  const std::string exported = dir.path() + "/model.safetensors";
  REQUIRE(ExportCheckpoint(c.checkpoint.dir, exported, DType::kFloat32).ok());

  TrainConfig fresh = Config(2, 1, 2);
  auto scratch = Run(2, fresh);
  REQUIRE(scratch.ok());
  fresh.model_init_from = exported;
  std::vector<std::string> lines;
  auto from_export = Run(2, fresh, {}, &lines);
  REQUIRE_MESSAGE(from_export.ok(), from_export.status().ToString());
  CHECK(from_export->first_step == 0);
  CHECK(std::find(lines.begin(), lines.end(), "model initialised from " + exported) != lines.end());
  // The trained weights are in use: the first loss is well below the untrained model's.
  CHECK(from_export->losses[0] < scratch->losses[0] - 0.1);

  fresh.checkpoint.dir = c.checkpoint.dir;
  fresh.checkpoint.load = CheckpointLoad::kLatest;
  fresh.train.steps = 9;
  lines.clear();
  auto resumed = Run(2, fresh, {}, &lines);
  REQUIRE(resumed.ok());
  CHECK(resumed->first_step == 8);
  CHECK(std::find(lines.begin(), lines.end(), "model initialised from " + exported) == lines.end());
}

// The CRC-32C of a whole file, as 8 hex digits (computed here, not by the checkpoint code).
std::string FileCrcHex(const fs::path& path) {
  const std::string bytes = Slurp(path);
  char hex[16];
  std::snprintf(hex, sizeof(hex), "%08x", Crc32c(bytes.data(), bytes.size()));
  return hex;
}

TEST_CASE("A save that fails at any point leaves the previous checkpoint, and the run resumes from it exactly") {
  // The in-process counterpart of the crash tests (docs/checkpoint.md, "Crash safety"): the fault
  // fails the file operation instead of killing the process, and the synchronous save fails.
  dslaunch::testing::TempDir dir;
  TrainConfig c = Config(2, 2, 6);
  c.checkpoint.dir = dir.path() + "/reference";
  c.checkpoint.interval = 2;
  auto reference = Run(2, c);
  REQUIRE_MESSAGE(reference.ok(), reference.status().ToString());
  REQUIRE(reference->losses.size() == 6);
  const SaveFault faults[] = {{SaveFaultPoint::kBeforeShard, 1, 4},
                              {SaveFaultPoint::kMidShard, 1, 4},
                              {SaveFaultPoint::kBeforeMeta, 0, 4},
                              {SaveFaultPoint::kBeforeLatest, 0, 4}};
  for (const SaveFault& fault : faults) {
    const std::string point(SaveFaultPointName(fault.point));
    CAPTURE(point);
    c.checkpoint.dir = dir.path() + "/" + point;
    FaultInjectingFileSystem files(LocalFileSystem(), fault, [](SaveFaultPoint, const std::string& path) {
      return InternalError("injected fault at " + path);
    });
    auto failed = RunRanks(2, c, [&](int r) { return r == fault.rank ? &files : nullptr; });
    CHECK(files.fired());
    REQUIRE_FALSE(failed[fault.rank].ok());
    CHECK(failed[fault.rank].status().message().find("injected fault at ") != std::string::npos);
    CHECK(Slurp(fs::path(c.checkpoint.dir) / "latest") == "global_step2\n");
    CHECK(fs::exists(fs::path(c.checkpoint.dir) / "global_step4" / "meta.json") ==
          (fault.point == SaveFaultPoint::kBeforeLatest));
    // A save that failed before its meta.json leaves no partial directory behind; one that failed
    // only at `latest` is complete and stays.
    CHECK(fs::exists(fs::path(c.checkpoint.dir) / "global_step4") == (fault.point == SaveFaultPoint::kBeforeLatest));

    TrainConfig resume = c;
    resume.checkpoint.load = CheckpointLoad::kLatest;
    auto resumed = Run(2, resume);
    REQUIRE_MESSAGE(resumed.ok(), resumed.status().ToString());
    CHECK(resumed->first_step == 2);
    CHECK(resumed->losses == std::vector<double>(reference->losses.begin() + 2, reference->losses.end()));
  }
}

TEST_CASE("A corrupt or truncated shard is detected by its checksum and named") {
  dslaunch::testing::TempDir dir;
  TrainConfig c = Config(2, 1, 2);
  c.checkpoint.dir = dir.path() + "/ckpt";
  REQUIRE(Run(2, c).ok());
  const fs::path step_dir = fs::path(c.checkpoint.dir) / "global_step2";
  const fs::path shard = step_dir / "rank00001.safetensors";
  const std::string recorded = FileCrcHex(shard);  // what meta.json records: the file as written
  REQUIRE(Slurp(step_dir / "meta.json").find("\"crc32c\": \"" + recorded + "\"") != std::string::npos);
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(shard) - 5));
    f.put('\x7f');
  }
  const std::string corrupt_error =
      shard.string() + " is corrupt: CRC-32C " + FileCrcHex(shard) + ", meta.json records " + recorded;
  // Rank 1 reads its own shard at stage 1 and names it; rank 0 learns why from rank 1. It is the
  // only checkpoint, so `load: auto` has nothing to fall back on and refuses to start at step 0.
  TrainConfig resume = Config(2, 1, 4);
  resume.checkpoint.dir = c.checkpoint.dir;
  resume.checkpoint.load = CheckpointLoad::kLatest;
  auto ranks = testing::TrainOnThreads(2, resume, testing::PatternTokens(/*validation=*/false));
  REQUIRE_FALSE(ranks[0].ok());
  REQUIRE_FALSE(ranks[1].ok());
  const std::string refusal =
      ". Not starting at step 0 over them: move the checkpoint directory away (or set another checkpoint.dir) to "
      "start fresh, or set checkpoint.load to the checkpoint to start from";
  CHECK(ranks[0].status().code() == StatusCode::kFailedPrecondition);
  CHECK(ranks[0].status().message() == "checkpoint resume: none of the 1 checkpoints there can be resumed (the newest, " +
                                           step_dir.string() + ": rank 1 could not read checkpoint " +
                                           step_dir.string() + ": " + corrupt_error + ")" + refusal);
  CHECK(ranks[1].status().code() == StatusCode::kFailedPrecondition);
  CHECK(ranks[1].status().message() == "checkpoint resume: none of the 1 checkpoints there can be resumed (the newest, " +
                                           step_dir.string() + ": " + corrupt_error + ")" + refusal);
  // One rank alone at stage 0 reads every shard: the same error; named by checkpoint.load, so no
  // other is tried.
  TrainConfig whole = Config(1, 0, 4);
  whole.checkpoint.load = CheckpointLoad::kPath;
  whole.checkpoint.load_path = c.checkpoint.dir;
  const std::string explicit_refusal = "; checkpoint.load names " + step_dir.string() +
                                       ", so no other checkpoint is tried: set checkpoint.load to another one, or to "
                                       "\"auto\" to resume from the newest complete one in checkpoint.dir";
  auto r = Run(1, whole);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kDataLoss);
  CHECK(r.status().message() == corrupt_error + explicit_refusal);
  // Truncated: found before any checksum, by the size meta.json records.
  const auto size = fs::file_size(shard);
  fs::resize_file(shard, size / 2);
  r = Run(1, whole);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kDataLoss);
  CHECK(r.status().message() == shard.string() + " is " + std::to_string(size / 2) + " bytes, meta.json records " +
                                    std::to_string(size) + explicit_refusal);
}

TEST_CASE("A checkpoint that does not fit the run is refused with what differs") {
  dslaunch::testing::TempDir dir;
  TrainConfig c = Config(2, 1, 2);
  c.checkpoint.dir = dir.path() + "/ckpt";
  REQUIRE(Run(2, c).ok());
  TrainConfig other = Config(2, 1, 4);
  other.checkpoint.load = CheckpointLoad::kPath;
  other.checkpoint.load_path = c.checkpoint.dir;
  other.batch.train_batch_size = 16;
  other.batch.gradient_accumulation_steps = 4;
  auto r = Run(2, other);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("global batch of 8") != std::string::npos);
  other = Config(2, 1, 4);
  other.checkpoint.load = CheckpointLoad::kPath;
  other.checkpoint.load_path = c.checkpoint.dir;
  other.model = GptConfig{2, 2, 24, 8, 32};
  r = Run(2, other);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("parameter 0") != std::string::npos);
  other = Config(2, 1, 4);
  other.checkpoint.load = CheckpointLoad::kPath;
  other.checkpoint.load_path = c.checkpoint.dir;
  other.engine.optimizer.kind = OptimizerKind::kSgd;
  r = Run(2, other);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("optimizer state") != std::string::npos);
}

TEST_CASE("keep_last deletes only older complete checkpoints, and load auto starts fresh without one, removing a crash's leftovers") {
  dslaunch::testing::TempDir dir;
  TrainConfig c = Config(2, 2, 10);
  c.checkpoint.dir = dir.path() + "/ckpt";
  c.checkpoint.interval = 2;
  c.checkpoint.keep_last = 2;
  c.checkpoint.load = CheckpointLoad::kLatest;
  // An unfinished step directory (no meta.json) from an earlier crash is removed at the start,
  // and said so (before: it stayed for ever); other entries are not checkpoints and stay.
  fs::create_directories(fs::path(c.checkpoint.dir) / "global_step1");
  fs::create_directories(fs::path(c.checkpoint.dir) / "global_step01");
  std::vector<std::string> lines;
  auto r = Run(2, c, {}, &lines);
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(r->first_step == 0);
  CHECK(std::find(lines.begin(), lines.end(), "removed " + c.checkpoint.dir +
                                                  "/global_step1: a save that did not finish (no meta.json)") !=
        lines.end());
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(c.checkpoint.dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"global_step01", "global_step10", "global_step8", "latest"});
  // Resuming a finished run does nothing more.
  r = Run(2, c);
  REQUIRE(r.ok());
  CHECK(r->first_step == 10);
  CHECK(r->losses.empty());
}

}  // namespace
}  // namespace dslaunch::runtime
