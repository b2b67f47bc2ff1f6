// Optimizer state offloaded to NVMe through the whole training loop (docs/offload.md, "The
// optimizer state on disk"), with real swap files under /var/tmp on 2 in-process ranks: losses
// bitwise equal to the in-memory run at every ZeRO stage in fp32 and fp16, checkpoints
// byte-identical and resumable across offload and no offload, a missing nvme_path refused before
// training, and no swap file left behind.
#include <doctest/doctest.h>


#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "runtime/checkpoint/names.h"
#include "runtime/engine/engine.h"
#include "runtime/models/gpt.h"
#include "runtime/swap/aligned_buffer.h"
#include "runtime/train/memory_estimate.h"
#include "runtime/swap/swap_file_name.h"
#include "runtime/train/trainer.h"
#include "tests/fakes/train_on_threads.h"
#include "tests/runtime/tiny_gpt_config.h"
#include "tests/support/subprocess.h"

namespace dslaunch::runtime {
namespace {

namespace fs = std::filesystem;

// Swap files go to a disk (not tmpfs: O_DIRECT and io_uring on a real file system).
constexpr char kDiskDir[] = "/var/tmp";

TrainConfig Config(int stage, Precision precision, int64_t steps) {
  TrainConfig c = TinyGptConfig(/*world=*/2, stage, steps);  // 2 ranks x micro-batch 2 x accumulation 2
  c.train.eval_steps = 2;
  c.seed = 7;
  c.engine.zero.allgather_bucket_size = 2500;
  c.engine.precision = precision;
  return c;
}

// `c` with its optimizer state in swap files under `dir`: sub-groups of 700 elements, so that the
// owned slice (several thousand elements) streams through the ring in several records.
TrainConfig Offloaded(TrainConfig c, const std::string& dir, int buffer_count = 3) {
  c.engine.offload_optimizer.device = swap::OffloadDevice::kNvme;
  c.engine.offload_optimizer.nvme_path = dir;
  c.engine.offload_optimizer.buffer_count = buffer_count;
  c.engine.zero.sub_group_size = 700;
  return c;
}

std::vector<Result<TrainResult>> Run(const TrainConfig& config, std::vector<std::string>* lines = nullptr) {
  return testing::TrainOnThreads(2, config, testing::PatternTokens(/*validation=*/true), [lines](int) {
    TrainHooks hooks;
    hooks.print = [lines](const std::string& line) {
      if (lines != nullptr) lines->push_back(line);
    };
    return hooks;
  });
}

TrainResult Rank0(const TrainConfig& config) {
  auto results = Run(config);
  for (const auto& r : results) REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  return *results[0];
}

bool BitwiseEqual(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

size_t SwapFilesIn(const std::string& dir) {
  const fs::path swap_dir = fs::path(dir) / swap::kSwapDirectoryName;
  if (!fs::exists(swap_dir)) return 0;
  return static_cast<size_t>(std::distance(fs::directory_iterator(swap_dir), fs::directory_iterator()));
}

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_CASE("Optimizer offload to NVMe gives bitwise the losses of the in-memory run at every stage") {
  dslaunch::testing::TempDir disk(kDiskDir);
  for (Precision precision : {Precision::kFp32, Precision::kFp16}) {
    for (int stage : {0, 1, 2, 3}) {
      CAPTURE(PrecisionName(precision));
      CAPTURE(stage);
      const TrainConfig c = Config(stage, precision, 6);
      const TrainResult memory = Rank0(c);
      const TrainResult offloaded = Rank0(Offloaded(c, disk.path(), 1 + stage % 3));
      REQUIRE(memory.losses.size() == 6);
      CHECK(BitwiseEqual(memory.losses, offloaded.losses));
      CHECK(std::memcmp(&memory.val_loss, &offloaded.val_loss, sizeof(double)) == 0);
      CHECK(memory.losses.back() < memory.losses.front());  // it trains: the comparison is of moving numbers
      CHECK(SwapFilesIn(disk.path()) == 0);  // removed when the engines are destroyed
    }
  }
}

TEST_CASE("Checkpoints of offloaded state are byte-identical and resume with and without offload") {
  dslaunch::testing::TempDir disk(kDiskDir);
  // Stage 0 saves a slice of the whole state each rank holds: the stream skips the rest.
  for (int stage : {0, 1, 3}) {
    CAPTURE(stage);
    TrainConfig c = Config(stage, Precision::kBf16, 8);
    c.checkpoint.dir = disk.path() + "/memory";
    c.checkpoint.interval = 4;
    const TrainResult full = Rank0(c);
    TrainConfig off = Offloaded(c, disk.path());
    off.checkpoint.dir = disk.path() + "/offload";
    const TrainResult full_offloaded = Rank0(off);
    CHECK(BitwiseEqual(full.losses, full_offloaded.losses));
    for (int rank : {0, 1}) {
      const std::string shard = "global_step4/" + ShardFileName(rank);
      const std::string saved = Slurp(fs::path(c.checkpoint.dir) / shard);
      CHECK(!saved.empty());
      CHECK(saved == Slurp(fs::path(off.checkpoint.dir) / shard));  // the format does not change
    }

    // In-memory checkpoint into an offloaded run, and the other way round.
    for (bool resume_offloaded : {true, false}) {
      CAPTURE(resume_offloaded);
      TrainConfig resumed = resume_offloaded ? off : c;
      resumed.checkpoint.load = CheckpointLoad::kPath;
      resumed.checkpoint.load_path = (resume_offloaded ? c : off).checkpoint.dir + "/global_step4";
      resumed.checkpoint.dir = disk.path() + "/resumed";
      const TrainResult rest = Rank0(resumed);
      CHECK(rest.first_step == 4);
      REQUIRE(rest.losses.size() == 4);
      CHECK(BitwiseEqual(rest.losses, std::vector<double>(full.losses.begin() + 4, full.losses.end())));
      fs::remove_all(resumed.checkpoint.dir);
    }
    fs::remove_all(c.checkpoint.dir);
    fs::remove_all(off.checkpoint.dir);
  }
  CHECK(SwapFilesIn(disk.path()) == 0);
}

TEST_CASE("Asynchronous saves of offloaded state give the same checkpoint") {
  dslaunch::testing::TempDir disk(kDiskDir);
  TrainConfig c = Offloaded(Config(2, Precision::kFp32, 4), disk.path());
  c.checkpoint.dir = disk.path() + "/sync";
  c.checkpoint.interval = 2;
  const TrainResult sync = Rank0(c);
  c.checkpoint.dir = disk.path() + "/async";
  c.checkpoint.async = true;
  const TrainResult async = Rank0(c);
  CHECK(BitwiseEqual(sync.losses, async.losses));
  for (int rank : {0, 1}) {
    const std::string shard = "global_step2/" + ShardFileName(rank);
    CHECK(Slurp(fs::path(disk.path()) / "sync" / shard) == Slurp(fs::path(disk.path()) / "async" / shard));
  }
}

TEST_CASE("The memory estimate of offloaded state is the engine's ring of buffers, not the state") {
  dslaunch::testing::TempDir disk(kDiskDir);
  for (int64_t sub_group : {int64_t{300}, int64_t{1'000'000'000}}) {
    CAPTURE(sub_group);
    TrainConfig c = Offloaded(Config(1, Precision::kBf16, 1), disk.path(), 3);
    c.engine.zero.sub_group_size = sub_group;
    GptModel model(std::get<GptConfig>(c.model), 2);
    std::vector<float> initial(model.layout().numel(), 0.5f);
    testing::ThreadCommunicatorGroup group(1, std::chrono::seconds(10));
    auto engine = Engine::Create(model.layout(), group.Get(0), c.engine, initial);
    REQUIRE_MESSAGE(engine.ok(), engine.status().ToString());
    const double held = static_cast<double>((*engine)->memory().optimizer_state);
    const double estimate = EstimateTrainingMemory(c, 1).optimizer_state;
    // The engine's records are rounded up to the disk's direct-I/O alignment (512 bytes on ext4); the
    // estimate's to 4096, which no disk exceeds: an upper bound within a block per buffer.
    CHECK(estimate >= held);
    CHECK(estimate - held < 3.0 * static_cast<double>(swap::kDefaultDirectIoAlignment));
    const double record_elements = std::min<double>(static_cast<double>(sub_group), model.layout().numel());
    const double record = static_cast<double>(
        swap::AlignUp(static_cast<uint64_t>(record_elements) * 12, swap::kDefaultDirectIoAlignment));
    CHECK(estimate == 3.0 * record);  // 3 buffers of master, exp_avg, exp_avg_sq
  }
}

TEST_CASE("A missing nvme_path is an error before training that names the setting and the path") {
  dslaunch::testing::TempDir disk(kDiskDir);
  const std::string missing = disk.path() + "/no-such-dir";
  auto results = Run(Offloaded(Config(1, Precision::kFp32, 2), missing));
  for (const auto& r : results) {
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kFailedPrecondition);
    const std::string m = r.status().message();
    CHECK_MESSAGE(m.find("zero_optimization.offload_optimizer.nvme_path") != std::string::npos, m);
    CHECK_MESSAGE(m.find(missing) != std::string::npos, m);
    CHECK_MESSAGE(m.find("No such file or directory") != std::string::npos, m);
  }
  CHECK_FALSE(fs::exists(missing));
}

TEST_CASE("A stale swap file of an ended run is removed at start and reported") {
  dslaunch::testing::TempDir disk(kDiskDir);
  const fs::path swap_dir = fs::path(disk.path()) / swap::kSwapDirectoryName;
  fs::create_directories(swap_dir);
  // Nobody holds its lock: the file of a run killed with SIGKILL.
  const fs::path stale = swap_dir / swap::FormatSwapFileName({swap::SwapKind::kOptimizer, 0, 999999});
  std::ofstream(stale) << "left behind";
  std::vector<std::string> lines;
  auto results = Run(Offloaded(Config(1, Precision::kFp32, 2), disk.path()), &lines);
  for (const auto& r : results) REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK_FALSE(fs::exists(stale));
  bool reported = false;
  for (const std::string& line : lines) reported |= line.find(stale.string()) != std::string::npos;
  CHECK(reported);
  CHECK(SwapFilesIn(disk.path()) == 0);
}

}  // namespace
}  // namespace dslaunch::runtime
