// Parameters on disk through the whole training loop (docs/offload.md, "Parameters on disk"): on
// 2 in-process ranks at ZeRO 3, a run whose parameter partitions live in swap files under /var/tmp
// has bitwise the losses of the in-memory run, with every group on disk and with some kept
// resident; checkpoints saved with offload resume with and without it.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "runtime/engine/engine.h"
#include "runtime/models/gpt.h"
#include "runtime/train/memory_estimate.h"
#include "runtime/train/trainer.h"
#include "tests/fakes/train_on_threads.h"
#include "tests/support/subprocess.h"

namespace dslaunch::runtime {
namespace {

namespace fs = std::filesystem;

// Swap files go to the disk-backed /var/tmp (O_DIRECT works there).
constexpr char kDiskDir[] = "/var/tmp";

TrainConfig Config(Precision precision) {
  TrainConfig c;
  c.batch = {8, 2, 2};  // 2 ranks x micro-batch 2 x accumulation 2
  c.engine.optimizer.kind = OptimizerKind::kAdamW;
  c.engine.optimizer.lr = 3e-3;
  c.engine.gradient_clipping = 1.0;
  c.model = GptConfig{3, 2, 16, 8, 32};
  c.data.seq_len = 8;
  c.train.steps = 8;
  c.train.eval_steps = 2;
  c.seed = 11;
  c.engine.zero.stage = 3;
  c.engine.zero.reduce_bucket_size = 4000;
  c.engine.zero.stage3_prefetch_bucket_size = 7000;
  c.engine.zero.stage3_param_persistence_threshold = 100;  // the layer norms and biases stay whole
  c.engine.precision = precision;
  return c;
}

TrainConfig Offloaded(TrainConfig c, const std::string& nvme_path, uint64_t max_in_cpu) {
  c.engine.offload_param = {.device = swap::OffloadDevice::kNvme, .nvme_path = nvme_path, .max_in_cpu = max_in_cpu};
  return c;
}

TrainResult RunRank0(const TrainConfig& config, std::vector<std::string>* lines = nullptr) {
  auto results = testing::TrainOnThreads(2, config, testing::PatternTokens(/*validation=*/true), [&](int rank) {
    TrainHooks hooks;
    if (rank == 0 && lines != nullptr) hooks.print = [lines](const std::string& l) { lines->push_back(l); };
    return hooks;
  });
  for (auto& r : results) REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  return *results[0];
}

bool SameLosses(const TrainResult& a, const TrainResult& b) {
  return a.losses.size() == b.losses.size() &&
         std::memcmp(a.losses.data(), b.losses.data(), a.losses.size() * sizeof(double)) == 0 &&
         std::memcmp(&a.val_loss, &b.val_loss, sizeof(double)) == 0;
}

TEST_CASE("Parameters on disk give bitwise the losses of the in-memory stage-3 run, fp32 and bf16") {
  for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
    // 0: every partitioned group on disk; 3000: the first groups (the embeddings' part of each
    // rank) resident, the blocks on disk.
    for (uint64_t max_in_cpu : {uint64_t{0}, uint64_t{3000}}) {
      CAPTURE(PrecisionName(precision));
      CAPTURE(max_in_cpu);
      dslaunch::testing::TempDir dir(kDiskDir);
      const TrainResult in_memory = RunRank0(Config(precision));
      const TrainResult offloaded = RunRank0(Offloaded(Config(precision), dir.path(), max_in_cpu));
      REQUIRE(in_memory.losses.size() == 8);
      CHECK(SameLosses(in_memory, offloaded));
      CHECK(in_memory.losses.back() < in_memory.losses.front());  // it trains
      CHECK_FALSE(fs::exists(dir.path() + "/dslaunch-swap"));  // the swap files went with the run, and their directory
    }
  }
}

TEST_CASE("A checkpoint saved with parameters on disk resumes with and without offload, with the same losses") {
  dslaunch::testing::TempDir dir(kDiskDir);
  TrainConfig c = Offloaded(Config(Precision::kBf16), dir.path() + "/swap", 0);
  fs::create_directories(c.engine.offload_param.nvme_path);
  c.train.steps = 8;
  c.checkpoint.dir = dir.path() + "/ckpt";
  c.checkpoint.interval = 4;
  const TrainResult full = RunRank0(c);
  REQUIRE(full.losses.size() == 8);
  CHECK(SameLosses(full, RunRank0(Config(Precision::kBf16))));  // saving changes nothing

  for (bool offload : {true, false}) {
    CAPTURE(offload);
    TrainConfig resumed = offload ? c : Config(Precision::kBf16);
    resumed.checkpoint.load = CheckpointLoad::kPath;
    resumed.checkpoint.load_path = c.checkpoint.dir + "/global_step4";
    resumed.checkpoint.dir = dir.path() + (offload ? "/ckpt-offload" : "/ckpt-memory");
    const TrainResult rest = RunRank0(resumed);
    CHECK(rest.first_step == 4);
    REQUIRE(rest.losses.size() == 4);
    CHECK(std::memcmp(rest.losses.data(), full.losses.data() + 4, 4 * sizeof(double)) == 0);
  }
  // And an in-memory checkpoint resumes into a run with offload.
  TrainConfig memory = Config(Precision::kBf16);
  memory.checkpoint.dir = dir.path() + "/ckpt-plain";
  memory.checkpoint.interval = 4;
  (void)RunRank0(memory);
  TrainConfig into = c;
  into.checkpoint.load = CheckpointLoad::kPath;
  into.checkpoint.load_path = memory.checkpoint.dir + "/global_step4";
  into.checkpoint.dir = dir.path() + "/ckpt-into";
  const TrainResult rest = RunRank0(into);
  REQUIRE(rest.losses.size() == 4);
  CHECK(std::memcmp(rest.losses.data(), full.losses.data() + 4, 4 * sizeof(double)) == 0);
}

TEST_CASE("The memory estimate with parameters on disk is the engine's own accounting") {
  for (int world : {1, 2, 3}) {
    for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
      for (uint64_t max_in_cpu : {uint64_t{0}, uint64_t{3000}, uint64_t{1} << 40}) {
        CAPTURE(world);
        CAPTURE(PrecisionName(precision));
        CAPTURE(max_in_cpu);
        dslaunch::testing::TempDir dir(kDiskDir);
        const TrainConfig c = Offloaded(Config(precision), dir.path(), max_in_cpu);
        GptModel model(std::get<GptConfig>(c.model), 2);
        std::vector<float> initial(model.layout().numel(), 0.5f);
        testing::ThreadCommunicatorGroup group(world, std::chrono::seconds(10));
        MemoryStats rank0;
        std::vector<std::thread> threads;
        for (int r = 0; r < world; ++r) {
          threads.emplace_back([&, r] {
            auto engine = Engine::Create(model.layout(), group.Get(r), c.engine, initial);
            REQUIRE_MESSAGE(engine.ok(), engine.status().ToString());
            if (r == 0) rank0 = (*engine)->memory();
          });
        }
        for (auto& t : threads) t.join();
        const MemoryEstimate m = EstimateTrainingMemory(c, world);
        CHECK(m.parameters == static_cast<double>(rank0.parameters));
        CHECK(m.optimizer_state == static_cast<double>(rank0.optimizer_state));
        const MemoryEstimate in_memory = EstimateTrainingMemory(Config(precision), world);
        if (max_in_cpu == 0) CHECK(m.parameters < in_memory.parameters);
      }
    }
  }
}

}  // namespace
}  // namespace dslaunch::runtime
