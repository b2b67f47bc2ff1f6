// Which checkpoint a run resumes (docs/checkpoint.md, "Which checkpoint a run resumes"), through
// the training loop with the in-process communicator and real files: a missing `latest`, a
// meta.json that lies, a corrupt newest checkpoint, nothing loadable, a run that would start at
// step 0 over checkpoints, and keep_last next to a damaged checkpoint.
#include "runtime/checkpoint/resume.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/checkpoint/checkpoint_directory.h"
#include "runtime/checkpoint/fault_injecting_file_system.h"
#include "runtime/checkpoint/names.h"
#include "runtime/train/trainer.h"
#include "tests/fakes/train_on_threads.h"
#include "tests/runtime/tiny_gpt_config.h"
#include "tests/support/subprocess.h"

namespace dslaunch::runtime {
namespace {

namespace fs = std::filesystem;

// The tiny gpt of checkpoint_test.cc on 2 ranks at `stage`, checkpoints every 2 steps into `dir`.
TrainConfig Config(int64_t steps, const std::string& dir, int stage = 1) {
  TrainConfig c = TinyGptConfig(/*world=*/2, stage, steps);
  c.checkpoint.dir = dir;
  c.checkpoint.interval = 2;
  return c;
}

struct Output {
  std::vector<std::string> lines;    // rank 0's
  std::vector<std::string> metrics;  // rank 0's
};

// Runs `config` on 2 threads; returns both ranks' results, rank 0's output in `out`; rank 0's
// checkpoint saves go through `rank0_files` when given.
std::vector<Result<TrainResult>> RunRanks(const TrainConfig& config, Output* out = nullptr,
                                          FileSystem* rank0_files = nullptr) {
  return testing::TrainOnThreads(2, config, testing::PatternTokens(/*validation=*/false), [=](int r) {
    TrainHooks hooks;
    if (r == 0) hooks.checkpoint_files = rank0_files;
    if (r == 0 && out != nullptr) {
      hooks.print = [out](const std::string& l) { out->lines.push_back(l); };
      hooks.metrics = [out](const std::string& m) { out->metrics.push_back(m); };
    }
    return hooks;
  });
}

Result<TrainResult> Run(const TrainConfig& config, Output* out = nullptr) { return RunRanks(config, out)[0]; }

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void Spit(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// Sets `key` of DIR/meta.json to `value`.
void EditMeta(const fs::path& step_dir, const std::string& key, int64_t value) {
  nlohmann::json j = nlohmann::json::parse(Slurp(step_dir / "meta.json"));
  j[key] = value;
  Spit(step_dir / "meta.json", j.dump(1));
}

// Flips one byte of the tensor data near the end of `file` (its size and header stay).
void FlipByte(const fs::path& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(fs::file_size(file) - 3));
  const char c = static_cast<char>(f.get());
  f.seekp(static_cast<std::streamoff>(fs::file_size(file) - 3));
  f.put(static_cast<char>(c ^ 0x40));
}

bool Has(const std::vector<std::string>& lines, const std::string& line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}
bool HasPrefix(const std::vector<std::string>& lines, const std::string& prefix) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
}

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST_CASE("Without a readable `latest` a run resumes from the newest complete checkpoint, found by scanning") {
  // Before: `load: auto` said "no checkpoint in DIR yet: starting at step 0" and saved over them.
  dslaunch::testing::TempDir tmp;
  auto full = Run(Config(8, tmp.path() + "/full"));
  REQUIRE(full.ok());
  const std::string dir = tmp.path() + "/ckpt";
  REQUIRE(Run(Config(6, dir)).ok());  // global_step2, 4, 6
  fs::remove(fs::path(dir) / "latest");

  TrainConfig resume = Config(8, dir);
  resume.checkpoint.load = CheckpointLoad::kLatest;
  Output out;
  auto resumed = Run(resume, &out);
  REQUIRE_MESSAGE(resumed.ok(), resumed.status().ToString());
  CHECK(resumed->first_step == 6);
  CHECK(resumed->losses == std::vector<double>(full->losses.begin() + 6, full->losses.end()));  // bitwise
  CHECK(Has(out.lines, dir + "/latest is missing: looking for the newest complete checkpoint in " + dir));
  CHECK(HasPrefix(out.lines, "resumed from " + dir + "/global_step6 at step 6 "));

  // A restart with a `latest` that names nothing: the same, said as a restart.
  Spit(fs::path(dir) / "latest", "../elsewhere\n");
  TrainConfig restart = Config(8, dir);
  restart.checkpoint.resume_newest = true;
  out = {};
  resumed = Run(restart, &out);
  REQUIRE_MESSAGE(resumed.ok(), resumed.status().ToString());
  CHECK(resumed->first_step == 8);
  CHECK(Has(out.lines, "restart: " + dir + "/latest does not name a checkpoint directory: looking for the newest "
                       "complete checkpoint in " + dir));
}

TEST_CASE("A meta.json that disagrees with its directory or its shards is refused by name") {
  // Before: a step of 1e18 "resumed at step 1000000000000000000", trained nothing and exited 0.
  dslaunch::testing::TempDir tmp;
  const std::string dir = tmp.path() + "/ckpt";
  REQUIRE(Run(Config(6, dir)).ok());
  EditMeta(fs::path(dir) / "global_step6", "step", 1000000000000000000);
  TrainConfig resume = Config(6, dir);
  resume.checkpoint.load = CheckpointLoad::kLatest;
  Output out;
  auto resumed = Run(resume, &out);
  REQUIRE_MESSAGE(resumed.ok(), resumed.status().ToString());
  CHECK(resumed->first_step == 4);
  CHECK(resumed->losses.size() == 2);
  const std::string why = dir + "/global_step6/meta.json: $.step is 1000000000000000000, but the directory is "
                          "global_step6";
  CHECK(Has(out.lines, "skipping checkpoint " + dir + "/global_step6: " + why));
  CHECK(Has(out.metrics, nlohmann::json{{"event", "checkpoint_skipped"},
                                        {"path", dir + "/global_step6"},
                                        {"reason", why}}.dump()));
  CHECK(HasPrefix(out.lines, "resumed from " + dir + "/global_step4 at step 4 "));

  // A shard of another step under step 4's name (same size: only its header's record differs),
  // named explicitly: refused, and nothing else is tried. Rank 1 checks shard 1.
  fs::copy_file(fs::path(dir) / "global_step2" / "rank00001.safetensors",
                fs::path(dir) / "global_step4" / "rank00001.safetensors", fs::copy_options::overwrite_existing);
  TrainConfig named = Config(6, tmp.path() + "/other");
  named.checkpoint.load = CheckpointLoad::kPath;
  named.checkpoint.load_path = dir + "/global_step4";
  auto ranks = RunRanks(named);
  const std::string shard_why =
      dir + "/global_step4/rank00001.safetensors: its header records step \"2\", meta.json 4";
  const std::string refusal = "; checkpoint.load names " + dir +
                              "/global_step4, so no other checkpoint is tried: set checkpoint.load to another one, "
                              "or to \"auto\" to resume from the newest complete one in checkpoint.dir";
  REQUIRE_FALSE(ranks[0].ok());
  CHECK(ranks[0].status().code() == StatusCode::kDataLoss);
  CHECK(ranks[0].status().message() ==
        "rank 1 could not check checkpoint " + dir + "/global_step4: " + shard_why + refusal);
  REQUIRE_FALSE(ranks[1].ok());
  CHECK(ranks[1].status().message() == shard_why + refusal);

  // A shard gone, and the direct checks of a step directory.
  fs::remove(fs::path(dir) / "global_step2" / "rank00000.safetensors");
  Status checked = CheckStepDirectory(dir + "/global_step2", 2);
  CHECK(checked.code() == StatusCode::kDataLoss);
  CHECK(checked.message() == dir + "/global_step2/rank00000.safetensors is missing (meta.json lists it)");
  checked = CheckStepDirectory(dir + "/global_step6", 6);
  CHECK(checked.ok());
  fs::create_directories(fs::path(dir) / "global_step7");
  checked = CheckStepDirectory(dir + "/global_step7", 7);
  CHECK(checked.code() == StatusCode::kNotFound);
  CHECK(checked.message() == dir + "/global_step7 has no meta.json: a save that did not finish");
}

TEST_CASE("A corrupt newest checkpoint is skipped on every rank for the previous one, with the state of a run "
          "resumed from that one directly") {
  // Before: every restart failed on the corrupt shard, though the previous checkpoint was complete.
  dslaunch::testing::TempDir tmp;
  const std::string dir = tmp.path() + "/ckpt";
  TrainConfig first = Config(6, dir, /*stage=*/2);
  first.engine.precision = Precision::kFp16;  // the loss scaler is restored too
  REQUIRE(Run(first).ok());  // global_step2, 4, 6
  const fs::path shard = fs::path(dir) / "global_step6" / "rank00001.safetensors";
  FlipByte(shard);

  // The run resumed from step 4 directly, into a directory of its own.
  TrainConfig direct = first;
  direct.train.steps = 8;
  direct.checkpoint.dir = tmp.path() + "/direct";
  direct.checkpoint.load = CheckpointLoad::kPath;
  direct.checkpoint.load_path = dir + "/global_step4";
  auto reference = Run(direct);
  REQUIRE_MESSAGE(reference.ok(), reference.status().ToString());

  // A restart of the first run to step 8: rank 1 finds the corrupt shard (stage 2: each rank
  // reads its own), both ranks skip step 6 and restore step 4 over what they read of it.
  TrainConfig restart = first;
  restart.train.steps = 8;
  restart.checkpoint.resume_newest = true;
  Output out;
  auto ranks = RunRanks(restart, &out);
  REQUIRE_MESSAGE(ranks[0].ok(), ranks[0].status().ToString());
  REQUIRE_MESSAGE(ranks[1].ok(), ranks[1].status().ToString());
  CHECK(ranks[0]->first_step == 4);
  CHECK(ranks[0]->losses == reference->losses);  // bitwise
  const std::vector<std::string> skip_lines = {
      "restart: skipping checkpoint " + dir + "/global_step6: rank 1 could not read checkpoint " + dir +
      "/global_step6: " + shard.string() + " is corrupt: CRC-32C "};
  CHECK(HasPrefix(out.lines, skip_lines[0]));
  CHECK(HasPrefix(out.lines, "restart: resumed from " + dir + "/global_step4 at step 4 "));
  // The state at the end is the direct run's, byte for byte.
  for (const char* file : {"rank00000.safetensors", "rank00001.safetensors", "meta.json"}) {
    CAPTURE(file);
    CHECK(Slurp(fs::path(dir) / "global_step8" / file) == Slurp(fs::path(tmp.path()) / "direct/global_step8" / file));
  }
}

TEST_CASE("When no checkpoint can be resumed the run fails naming the newest, and leaves them in place") {
  dslaunch::testing::TempDir tmp;
  const std::string dir = tmp.path() + "/ckpt";
  REQUIRE(Run(Config(4, dir)).ok());  // global_step2, 4
  EditMeta(fs::path(dir) / "global_step4", "step", 5);
  EditMeta(fs::path(dir) / "global_step2", "step", 3);
  const std::string meta4 = Slurp(fs::path(dir) / "global_step4" / "meta.json");
  TrainConfig resume = Config(8, dir);
  resume.checkpoint.load = CheckpointLoad::kLatest;
  Output out;
  auto ranks = RunRanks(resume, &out);
  const std::string what_to_do =
      ". Not starting at step 0 over them: move the checkpoint directory away (or set another checkpoint.dir) to "
      "start fresh, or set checkpoint.load to the checkpoint to start from";
  for (int r = 0; r < 2; ++r) {
    CAPTURE(r);
    REQUIRE_FALSE(ranks[r].ok());
    CHECK(ranks[r].status().code() == StatusCode::kFailedPrecondition);
    CHECK(ranks[r].status().message() ==
          "checkpoint resume: none of the 2 checkpoints there can be resumed (the newest, " + dir + "/global_step4: " +
              dir + "/global_step4/meta.json: $.step is 5, but the directory is global_step4)" + what_to_do);
  }
  CHECK(Has(out.lines, "skipping checkpoint " + dir + "/global_step2: " + dir +
                           "/global_step2/meta.json: $.step is 3, but the directory is global_step2"));
  CHECK(Entries(dir) == std::vector<std::string>{"global_step2", "global_step4", "latest"});
  CHECK(Slurp(fs::path(dir) / "global_step4" / "meta.json") == meta4);

  // `latest` left, but no step directory with meta.json: still not step 0.
  fs::remove(fs::path(dir) / "global_step4" / "meta.json");
  fs::remove(fs::path(dir) / "global_step2" / "meta.json");
  auto r = Run(resume);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "checkpoint resume: " + dir + "/latest names global_step4, which has no meta.json "
                                "(a save that did not finish), and no step directory there has meta.json" +
                                    what_to_do);
  // Only a crash's leftovers: step 0, and they are removed.
  fs::remove(fs::path(dir) / "latest");
  out = {};
  r = Run(resume, &out);
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(r->first_step == 0);
  CHECK(Has(out.lines, "no checkpoint in " + dir + " yet: starting at step 0"));
  CHECK(Has(out.lines, "removed " + dir + "/global_step4: a save that did not finish (no meta.json)"));
  CHECK(Has(out.lines, "removed " + dir + "/global_step2: a save that did not finish (no meta.json)"));
  CHECK(Entries(dir) == std::vector<std::string>{"global_step2", "global_step4", "global_step6", "global_step8",
                                                 "latest"});
}

TEST_CASE("A run without `load` refuses to start at step 0 over the checkpoints in its dir") {
  dslaunch::testing::TempDir tmp;
  const std::string dir = tmp.path() + "/ckpt";
  REQUIRE(Run(Config(2, dir)).ok());
  const std::string before = Slurp(fs::path(dir) / "global_step2" / "rank00000.safetensors");
  auto again = RunRanks(Config(4, dir));
  for (int r = 0; r < 2; ++r) {
    REQUIRE_FALSE(again[r].ok());
    CHECK(again[r].status().code() == StatusCode::kFailedPrecondition);
    CHECK(again[r].status().message() ==
          "checkpoint.dir " + dir + " already holds checkpoints (newest: " + dir +
              "/global_step2) and checkpoint.load is not set: a run from step 0 would overwrite them. Set "
              "checkpoint.load to \"auto\" to resume from the newest, or move " + dir +
              " away (or set another checkpoint.dir) to start fresh");
  }
  CHECK(Slurp(fs::path(dir) / "global_step2" / "rank00000.safetensors") == before);
}

TEST_CASE("keep_last counts only complete checkpoints: a damaged newer one never displaces the one just saved") {
  dslaunch::testing::TempDir tmp;
  const std::string dir = tmp.path() + "/ckpt";
  REQUIRE(Run(Config(6, dir)).ok());  // global_step2, 4, 6
  // A copy under a later name: its meta.json says step 6, so it is damaged, not complete.
  fs::copy(fs::path(dir) / "global_step6", fs::path(dir) / "global_step100", fs::copy_options::recursive);
  TrainConfig resume = Config(8, dir);
  resume.checkpoint.load = CheckpointLoad::kLatest;
  resume.checkpoint.keep_last = 1;
  auto r = Run(resume);
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(r->first_step == 6);
  // Before: the newest with meta.json (global_step100) was the one kept, and the step 8 just
  // saved was deleted.
  CHECK(Entries(dir) == std::vector<std::string>{"global_step100", "global_step8", "latest"});
  CHECK(CheckStepDirectory(dir + "/global_step8", 8).ok());
}

TEST_CASE("RemoveUnfinishedStepDirectories spares the save in progress and complete checkpoints") {
  dslaunch::testing::TempDir tmp;
  const std::string dir = tmp.path() + "/ckpt";
  // A leftover that appears while the run goes on (here: made as the save of step 2 writes its
  // meta.json) is removed when that save completes.
  FaultInjectingFileSystem leftover(LocalFileSystem(), {SaveFaultPoint::kBeforeMeta, 0, 2},
                                    [](SaveFaultPoint, const std::string& meta_file) {
                                      const fs::path step_dir = fs::path(meta_file).parent_path();
                                      fs::create_directories(step_dir.parent_path() / "global_step1");
                                      return Status::Ok();
                                    });
  REQUIRE(RunRanks(Config(2, dir), nullptr, &leftover)[0].ok());
  CHECK(leftover.fired());
  CHECK(Entries(dir) == std::vector<std::string>{"global_step2", "latest"});
  fs::create_directories(fs::path(dir) / "global_step7");
  fs::create_directories(fs::path(dir) / "global_step9");
  const std::vector<std::string> lines = RemoveUnfinishedStepDirectories(LocalFileSystem(), dir, 9);
  CHECK(lines == std::vector<std::string>{"removed " + dir + "/global_step7: a save that did not finish (no meta.json)"});
  CHECK(Entries(dir) == std::vector<std::string>{"global_step2", "global_step9", "latest"});
}

}  // namespace
}  // namespace dslaunch::runtime
