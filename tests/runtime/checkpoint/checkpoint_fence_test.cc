// The generation fence of a checkpoint save (SaveOptions::fence, docs/elastic.md "Fencing a lost
// node"): a rank 0 whose generation is over publishes nothing, so a stale worker cannot name its
// checkpoint as the newest over the new generation's. In-process communicator, real files.
#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/train/trainer.h"
#include "tests/fakes/train_on_threads.h"
#include "tests/runtime/tiny_gpt_config.h"
#include "tests/support/subprocess.h"

namespace dslaunch::runtime {
namespace {

namespace fs = std::filesystem;


std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_CASE("A save whose generation fence fails publishes nothing: no meta.json, `latest` still names the previous checkpoint") {
  dslaunch::testing::TempDir dir;
  TrainConfig c = TinyGptConfig(/*world=*/2, /*stage=*/1, /*steps=*/4);
  c.checkpoint.dir = dir.path() + "/ckpt";
  c.checkpoint.interval = 2;
  std::atomic<int> fence_calls{0};
  auto results = testing::TrainOnThreads(2, c, testing::PatternTokens(false), [&](int) {
    TrainHooks hooks;
    // Current at the save of step 2; at step 4 the job has moved to another generation.
    hooks.checkpoint_fence = [&]() -> Status {
      if (++fence_calls == 1) return Status::Ok();
      return AbortedError("store 127.0.0.1:1 gen 0: check 'checkpoint_fence': this generation is over");
    };
    return hooks;
  });
  CHECK(fence_calls == 2);  // rank 0 only, once per save
  REQUIRE_FALSE(results[0].ok());
  CHECK(results[0].status().message() ==
        "the end-of-run checkpoint of step 4 in " + c.checkpoint.dir + " failed: checkpoint of step 4: not published, " +
            "this generation is over (store 127.0.0.1:1 gen 0: check 'checkpoint_fence': this generation is over); " +
            c.checkpoint.dir + "/latest still names the previous checkpoint; the last complete checkpoint is " +
            c.checkpoint.dir + "/global_step2 (step 2), so steps 3-4 are not saved");
  REQUIRE_FALSE(results[1].ok());
  CHECK(Slurp(fs::path(c.checkpoint.dir) / "latest") == "global_step2\n");
  CHECK(fs::exists(fs::path(c.checkpoint.dir) / "global_step2" / "meta.json"));
  CHECK_FALSE(fs::exists(fs::path(c.checkpoint.dir) / "global_step4" / "meta.json"));
}

}  // namespace
}  // namespace dslaunch::runtime
