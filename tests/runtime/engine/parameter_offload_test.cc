// The engine with its parameter partitions in swap files (ZeRO 3, offload_param on nvme), on
// real files under /var/tmp: the parameters after steps equal the in-memory engine's bitwise,
// the swap file exists while the engine does and goes with it, a stale one is swept, and what
// cannot work is refused before training, naming the key.
#include <doctest/doctest.h>

#include <sys/file.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/engine/engine.h"
#include "runtime/swap/swap_file_name.h"
#include "tests/fakes/engine_on_threads.h"
#include "tests/support/subprocess.h"

namespace dslaunch::runtime {
namespace {

namespace fs = std::filesystem;

// Swap files go to the disk-backed /var/tmp (O_DIRECT works there).
constexpr char kDiskDir[] = "/var/tmp";

size_t SwapFiles(const std::string& nvme_path) {
  const std::string dir = swap::SwapDirectory(nvme_path);
  if (!fs::exists(dir)) return 0;
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += swap::ParseSwapFileName(e.path().filename().string()).has_value();
  return n;
}

EngineOptions Stage3(Precision precision) {
  EngineOptions o;
  o.zero.stage = 3;
  o.zero.stage3_prefetch_bucket_size = 16;  // runs of more than one group
  o.zero.stage3_param_persistence_threshold = 5;  // group "c" stays whole
  o.precision = precision;
  o.optimizer.lr = 0.05;
  return o;
}

// Three steps of a model-like pass (forward in order, backward in reverse); the parameters after.
std::vector<float> Train3(Engine& engine, const ParameterLayout& layout) {
  ParameterAccess& access = engine.access();
  const int groups = static_cast<int>(layout.groups().size());
  for (int step = 0; step < 3; ++step) {
    engine.BeginStep(1);
    for (int g = 0; g < groups; ++g) {
      (void)access.Acquire(g);
      access.Release(g);
    }
    for (int g = groups - 1; g >= 0; --g) {
      std::span<const float> p = access.Acquire(g);
      std::span<float> grad = access.Gradient(g);
      for (size_t i = 0; i < grad.size(); ++i) grad[i] += p[i] * p[i] - 0.1f * static_cast<float>(i % 3);
      access.Release(g);
      access.GradientReady(g);
    }
    auto stats = engine.Step();
    REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
  }
  std::vector<float> out(layout.numel());
  REQUIRE(engine.GatherParameters(out).ok());
  // The 16-bit parameters themselves, as the model sees them.
  for (int g = 0; g < groups; ++g) {
    std::span<const float> p = access.Acquire(g);
    out.insert(out.end(), p.begin(), p.end());
    access.Release(g);
  }
  return out;
}

std::vector<std::vector<float>> RunOn2(const EngineOptions& options, const ParameterLayout& layout,
                                       const std::vector<float>& initial) {
  std::vector<std::vector<float>> result(2);
  testing::OnEveryRank(2, layout, options, initial,
                       [&](int rank, Engine& engine) { result[static_cast<size_t>(rank)] = Train3(engine, layout); });
  return result;
}

TEST_CASE("Parameters on disk give bitwise the in-memory stage-3 parameters, in fp32, fp16 and bf16") {
  const ParameterLayout layout = testing::OddLayout();
  std::vector<float> initial(layout.numel());
  for (size_t i = 0; i < initial.size(); ++i) initial[i] = 0.03f * static_cast<float>(i % 13) - 0.17f;
  for (Precision precision : {Precision::kFp32, Precision::kFp16, Precision::kBf16}) {
    // Rank 0 owns "a" (21 elements), rank 1 "b" (15) and its part of "c" (persistent). max_in_cpu
    // 0: "a" and "b" on disk; 15: rank 1 keeps "b" resident, rank 0 reads "a" from disk; 1000: all
    // resident, no file.
    for (uint64_t max_in_cpu : {uint64_t{0}, uint64_t{15}, uint64_t{1000}}) {
      CAPTURE(PrecisionName(precision));
      CAPTURE(max_in_cpu);
      dslaunch::testing::TempDir dir(kDiskDir);
      EngineOptions in_memory = Stage3(precision);
      EngineOptions offloaded = in_memory;
      offloaded.offload_param = {.device = swap::OffloadDevice::kNvme, .nvme_path = dir.path(), .buffer_count = 2,
                                 .buffer_size = 100, .max_in_cpu = max_in_cpu};
      const auto expected = RunOn2(in_memory, layout, initial);
      const auto got = RunOn2(offloaded, layout, initial);
      for (size_t r = 0; r < 2; ++r) {
        REQUIRE(got[r].size() == expected[r].size());
        CHECK(std::memcmp(got[r].data(), expected[r].data(), got[r].size() * sizeof(float)) == 0);
      }
      CHECK(got[0] != std::vector<float>(got[0].size(), 0.0f));
      CHECK(SwapFiles(dir.path()) == 0);  // removed with the engines
    }
  }
}

TEST_CASE("The parameter swap file lives as long as the engine, which counts no resident parameters with max_in_cpu 0") {
  const ParameterLayout layout = testing::OddLayout();
  std::vector<float> initial(layout.numel(), 0.5f);
  dslaunch::testing::TempDir dir(kDiskDir);
  EngineOptions o = Stage3(Precision::kBf16);
  o.zero.stage3_param_persistence_threshold = 0;
  o.offload_param = {.device = swap::OffloadDevice::kNvme, .nvme_path = dir.path(), .max_in_cpu = 0};
  EngineOptions in_memory = o;
  in_memory.offload_param = {};
  testing::OnEveryRankComm(1, [&](int, Communicator& comm) {
    auto engine = Engine::Create(layout, comm, o, initial);
    REQUIRE_MESSAGE(engine.ok(), engine.status().ToString());
    CHECK(SwapFiles(dir.path()) == 1);
    CHECK((*engine)->memory().parameters == 0);  // nothing resident
    auto reference = Engine::Create(layout, comm, in_memory, initial);
    REQUIRE(reference.ok());
    CHECK((*reference)->memory().parameters == layout.numel() * 2);
    (void)Train3(**engine, layout);
    engine->reset();
    CHECK(SwapFiles(dir.path()) == 0);
  });
}

TEST_CASE("A stale parameter swap file is removed at the next start and named in the engine's notes") {
  const ParameterLayout layout = testing::OddLayout();
  std::vector<float> initial(layout.numel(), 0.25f);
  dslaunch::testing::TempDir dir(kDiskDir);
  fs::create_directories(swap::SwapDirectory(dir.path()));
  // A file of a run that ended without cleaning up: nobody holds its lock.
  const std::string stale = swap::SwapDirectory(dir.path()) + "/" +
                            swap::FormatSwapFileName({swap::SwapKind::kParam, 0, 999999});
  std::ofstream(stale) << "left over";
  EngineOptions o = Stage3(Precision::kFp32);
  o.offload_param = {.device = swap::OffloadDevice::kNvme, .nvme_path = dir.path(), .max_in_cpu = 0};
  testing::OnEveryRank(1, layout, o, initial, [&](int, Engine& engine) {
    CHECK_FALSE(fs::exists(stale));
    const std::vector<std::string> notes = engine.notes();
    REQUIRE(notes.size() == 1);
    CHECK(notes[0].find("removed stale swap file '" + stale + "'") != std::string::npos);
    CHECK(SwapFiles(dir.path()) == 1);  // its own
  });
}

TEST_CASE("A swap file cut short fails the next step with the file and the groups named, and the run goes no further") {
  const ParameterLayout layout = testing::OddLayout();
  std::vector<float> initial(layout.numel(), 0.3f);
  dslaunch::testing::TempDir dir(kDiskDir);
  EngineOptions o = Stage3(Precision::kFp16);
  o.offload_param = {.device = swap::OffloadDevice::kNvme, .nvme_path = dir.path(), .max_in_cpu = 0};
  testing::OnEveryRank(1, layout, o, initial, [&](int, Engine& engine) {
    std::string file;
    for (const auto& e : fs::directory_iterator(swap::SwapDirectory(dir.path()))) file = e.path().string();
    REQUIRE_FALSE(file.empty());
    fs::resize_file(file, 0);  // as a disk that lost the data
    engine.BeginStep(1);
    (void)engine.access().Acquire(0);
    engine.access().Release(0);
    CHECK_FALSE(engine.status().ok());
    const std::string message = engine.status().ToString();
    CHECK(message.find("parameter all-gather of groups a..") != std::string::npos);
    CAPTURE(message);
    CHECK(message.find(file) != std::string::npos);
    auto step = engine.Step();
    REQUIRE_FALSE(step.ok());
    CHECK(step.status().ToString() == message);
  });
}

TEST_CASE("Parameter offload is refused before training where it cannot work, naming the key") {
  const ParameterLayout layout = testing::OddLayout();
  std::vector<float> initial(layout.numel(), 0.1f);
  dslaunch::testing::TempDir dir(kDiskDir);
  struct Case {
    int stage;
    std::string nvme_path;
    uint64_t buffer_size;
    std::string message;  // its start
  };
  const Case cases[] = {
      {2, dir.path(), 100,
       "zero_optimization.offload_param.device: \"nvme\" needs zero_optimization.stage 3 (only stage 3 partitions "
       "parameters), stage is 2"},
      {3, dir.path() + "/missing", 100, "zero_optimization.offload_param.nvme_path '" + dir.path() + "/missing'"},
      {3, dir.path(), 4,
       "zero_optimization.offload_param.buffer_size: 4 elements cannot hold this rank's largest parameter partition "
       "(21 elements); raise buffer_size"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.message);
    EngineOptions o = Stage3(Precision::kFp16);
    o.zero.stage = c.stage;
    o.offload_param = {.device = swap::OffloadDevice::kNvme, .nvme_path = c.nvme_path, .buffer_size = c.buffer_size,
                       .max_in_cpu = 0};
    testing::OnEveryRankComm(1, [&](int, Communicator& comm) {
      auto engine = Engine::Create(layout, comm, o, initial);
      REQUIRE_FALSE(engine.ok());
      CHECK(engine.status().message().substr(0, c.message.size()) == c.message);
    });
    CHECK(SwapFiles(dir.path()) == 0);
  }
  // A refusal on one rank fails every rank's Create, so that none waits for it in a collective:
  // rank 0's largest partition (21 elements) exceeds 16, rank 1's (15) does not.
  EngineOptions o = Stage3(Precision::kBf16);
  o.offload_param = {.device = swap::OffloadDevice::kNvme, .nvme_path = dir.path(), .buffer_size = 16, .max_in_cpu = 0};
  std::vector<std::string> errors(2);
  testing::OnEveryRankComm(2, [&](int rank, Communicator& comm) {
    auto engine = Engine::Create(layout, comm, o, initial);
    REQUIRE_FALSE(engine.ok());
    errors[static_cast<size_t>(rank)] = engine.status().message();
  });
  CHECK(errors[0].find("zero_optimization.offload_param.buffer_size: 16 elements cannot hold this rank's largest parameter partition (21") == 0);
  CHECK(errors[1] == "rank 0 could not prepare its parameter swap directory (see its error)");
  CHECK(SwapFiles(dir.path()) == 0);
}

}  // namespace
}  // namespace dslaunch::runtime
