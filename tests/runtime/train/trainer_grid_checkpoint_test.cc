// Checkpoints of a model split over pipeline stages and tensor ranks (docs/checkpoint.md, "A model
// split over ranks"), on in-process ranks: saved in the whole model's coordinates, resumed on
// another grid, another world size and another ZeRO stage with no conversion step, exported and
// imported from any grid.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/model_file.h"
#include "runtime/checkpoint/shard_reader.h"
#include "runtime/models/gpt.h"
#include "runtime/train/pipeline_stage.h"
#include "runtime/train/trainer.h"
#include "tests/fakes/train_on_threads.h"
#include "tests/runtime/train/grid_gpt_config.h"
#include "tests/support/subprocess.h"

namespace dslaunch::runtime {
namespace {

namespace fs = std::filesystem;

// A run's shape: the grid, its world size, its ZeRO stage.
struct Shape {
  int stages = 1, tensor = 1, world = 2, zero = 1;
  std::string Name() const {
    return std::to_string(stages) + " stages x " + std::to_string(world / (stages * tensor)) + " data x " +
           std::to_string(tensor) + " tensor, ZeRO " + std::to_string(zero);
  }
};

// The grid GPT (tests/runtime/train/grid_gpt_config.h) on `shape`, clipped at every step (the
// whole model's norm decides it), saved every 3 steps into `dir`.
TrainConfig Config(const Shape& shape, const std::string& dir) {
  TrainConfig c = GridGptConfig(shape.stages, shape.tensor, shape.world / (shape.stages * shape.tensor), shape.zero);
  c.engine.gradient_clipping = 0.05;
  c.checkpoint.dir = dir;
  c.checkpoint.interval = 3;
  return c;
}

TrainResult Run(const Shape& shape, const TrainConfig& config) {
  CAPTURE(shape.Name());
  const auto results = testing::TrainOnGrid(shape.world, config, testing::PatternTokens(/*validation=*/true));
  for (const auto& r : results) REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  return *results[0];
}

// Every state tensor of the checkpoint at `path`, whole, in the whole model's order.
std::vector<std::vector<float>> WholeState(const std::string& path) {
  const Result<CheckpointMeta> meta = ReadCheckpointMeta(path);
  REQUIRE_MESSAGE(meta.ok(), meta.status().ToString());
  ShardReader reader(path, *meta);
  REQUIRE(reader.VerifyAll().ok());
  std::vector<std::vector<float>> state;
  for (const std::string& name : meta->state_tensors) {
    state.emplace_back(meta->numel);
    const Status read = reader.Read(name, 0, meta->numel, state.back().data());
    REQUIRE_MESSAGE(read.ok(), read.ToString());
  }
  return state;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool SameBits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

TEST_CASE("A checkpoint saved on a grid resumes on every other grid, world size and ZeRO stage, and the run goes "
          "on as the uninterrupted one") {
  dslaunch::testing::TempDir disk;
  struct Saved {
    Shape shape;
    bool async;
  };
  // The grids that save: 2 x 2 x 2 (the periodic save asynchronous), tensor ranks at ZeRO 3,
  // and a run without a grid (a version 1 checkpoint).
  for (const Saved& saved : {Saved{{2, 2, 8, 1}, true}, Saved{{1, 2, 4, 3}, false}, Saved{{1, 1, 2, 2}, false}}) {
    CAPTURE(saved.shape.Name());
    TrainConfig config = Config(saved.shape, disk.path() + "/saved");
    config.checkpoint.async = saved.async;
    const TrainResult whole = Run(saved.shape, config);
    REQUIRE(whole.losses.size() == 6);
    REQUIRE(fs::exists(config.checkpoint.dir + "/global_step3/meta.json"));
    const Result<CheckpointMeta> meta = ReadCheckpointMeta(config.checkpoint.dir + "/global_step3");
    REQUIRE(meta.ok());
    CHECK(meta->world_size == saved.shape.world);
    CHECK(meta->grid.pipeline == saved.shape.stages);
    CHECK(meta->grid.tensor == saved.shape.tensor);
    CHECK(meta->version == (saved.shape.stages * saved.shape.tensor > 1 ? 2 : 1));

    for (const Shape& into : {saved.shape, Shape{1, 1, 2, 0}, Shape{1, 1, 4, 2}, Shape{1, 4, 4, 3},
                              Shape{4, 1, 4, 1}, Shape{2, 2, 4, 0}, Shape{1, 1, 1, 0}}) {
      CAPTURE(into.Name());
      TrainConfig resumed = Config(into, disk.path() + "/resumed");
      resumed.checkpoint.load = CheckpointLoad::kPath;
      resumed.checkpoint.load_path = config.checkpoint.dir + "/global_step3";
      const TrainResult rest = Run(into, resumed);
      CHECK(rest.first_step == 3);
      REQUIRE(rest.losses.size() == 3);
      const std::vector<double> after(whole.losses.begin() + 3, whole.losses.end());
      const bool same_grid = into.stages == saved.shape.stages && into.tensor == saved.shape.tensor &&
                             into.world == saved.shape.world && into.zero == saved.shape.zero;
      if (same_grid) {
        CHECK(SameBits(rest.losses, after));  // the state came back exactly
      } else {
        // Another grid sums in another order (docs/parallelism.md, "Tolerance").
        for (size_t i = 0; i < 3; ++i) CHECK(rest.losses[i] == doctest::Approx(after[i]).epsilon(1e-5));
      }
      CHECK(fs::exists(resumed.checkpoint.dir + "/global_step6/meta.json"));  // and saved by the new grid
      fs::remove_all(resumed.checkpoint.dir);
    }
    fs::remove_all(config.checkpoint.dir);
  }
}

// The value of state tensor `tensor` at whole-model element i in the made-up state below: every
// element of every tensor different.
float Code(size_t tensor, uint64_t i) { return static_cast<float>(tensor) * 100.0f + static_cast<float>(i) / 1024.0f; }

// Collective on `shape`'s grid: for each rank on a thread, the engine of its part of the model
// (of the whole model without a grid), restored to the made-up state when `made_up`, and the
// CheckpointRun the trainer would give it; then body(engine, run, world communicator).
template <class Body>
void OnGridEngines(const Shape& shape, bool made_up, Body body) {
  CAPTURE(shape.Name());
  const TrainConfig config = Config(shape, "");
  const GptConfig gpt = std::get<GptConfig>(config.model);
  const ProcessGrid grid = *ProcessGrid::Create(shape.world, shape.stages, shape.tensor);
  const bool split = shape.stages * shape.tensor > 1;
  testing::ThreadGrid groups(grid);
  const std::vector<StageBlocks> blocks = *PartitionStages(gpt, shape.stages, config.pipeline.partition_method);
  const GptModel whole(gpt, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < shape.world; ++r) {
    threads.emplace_back([&, r] {
      const GridCoordinates at = grid.CoordinatesOf(r);
      const StageBlocks stage = blocks[static_cast<size_t>(at.pipeline)];
      const GptModel model(gpt, 0, GptPart{stage.begin, stage.end, at.tensor, shape.tensor});
      PartPlacement placement{whole.layout(), model.WholePieces(), {}};
      if (at.tensor > 0) placement.saved_elsewhere = model.ReplicatedRanges();
      Communicator& engine_comm = split ? *groups.RunOf(r).data : groups.World(r);
      auto engine = Engine::Create(model.layout(), engine_comm, config.engine,
                                   [](size_t, std::span<float> out) { std::fill(out.begin(), out.end(), 0.0f); });
      REQUIRE_MESSAGE(engine.ok(), engine.status().ToString());
      CheckpointRun run;
      run.model = "gpt";
      run.part = split ? &placement : nullptr;
      run.layout = &whole.layout();
      run.grid = {shape.stages, shape.tensor};
      run.global_batch = 16;
      run.seed = config.seed;
      run.zero_stage = shape.zero;
      run.precision = PrecisionName(config.engine.precision);
      run.optimizer = OptimizerTypeName(config.engine.optimizer.kind);
      if (made_up) {
        std::vector<std::string> names;
        for (const auto& [name, data] : (*engine)->Snapshot().tensors) names.push_back(name);
        const Status restored = (*engine)->Restore(
            [&](const std::string& name, size_t begin, size_t end, float* out) {
              const size_t tensor = static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
              ForEachRun(PiecesOf(model.WholePieces(), {begin, end}), [&](uint64_t from, uint64_t count) {
                for (uint64_t i = from; i < from + count; ++i) *out++ = Code(tensor, i);
              });
              return Status::Ok();
            },
            3, 3, (*engine)->Snapshot().loss_scaler);
        REQUIRE_MESSAGE(restored.ok(), restored.ToString());
      }
      body(**engine, run, groups.World(r));
    });
  }
  for (auto& t : threads) t.join();
}

TEST_CASE("Saved by any grid, a state is in the whole model's coordinates; loaded by another grid and saved again, "
          "it is the same bits") {
  dslaunch::testing::TempDir disk;
  const std::string made = disk.path() + "/made";
  OnGridEngines(Shape{2, 2, 8, 1}, true, [&](Engine& engine, const CheckpointRun& run, Communicator& world) {
    const auto saved = SaveCheckpoint(made, 3, engine, world, run, SaveOptions{});
    REQUIRE_MESSAGE(saved.ok(), saved.status().ToString());
  });
  const std::vector<std::vector<float>> state = WholeState(made + "/global_step3");
  REQUIRE(state.size() == 3);  // master, exp_avg, exp_avg_sq
  for (size_t k = 0; k < state.size(); ++k) {
    bool every = true;
    for (size_t i = 0; i < state[k].size(); ++i) every = every && state[k][i] == Code(k, i);
    CHECK(every);
  }
  // The same state made on other grids, and without one, is saved the same.
  for (const Shape& shape : {Shape{1, 4, 4, 3}, Shape{4, 1, 4, 0}, Shape{1, 1, 3, 2}}) {
    const std::string dir = disk.path() + "/made-again";
    OnGridEngines(shape, true, [&](Engine& engine, const CheckpointRun& run, Communicator& world) {
      REQUIRE(SaveCheckpoint(dir, 3, engine, world, run, SaveOptions{}).ok());
    });
    CHECK(WholeState(dir + "/global_step3") == state);
    fs::remove_all(dir);
  }
  // Loaded and saved again, synchronously and asynchronously, by grids of every kind.
  for (const Shape& via : {Shape{2, 2, 8, 1}, Shape{1, 4, 4, 0}, Shape{4, 1, 8, 1}, Shape{2, 1, 2, 1},
                           Shape{1, 2, 6, 3}, Shape{1, 1, 1, 3}}) {
    for (bool async : {false, true}) {
      CAPTURE(async);
      const std::string dir = disk.path() + "/again";
      OnGridEngines(via, false, [&](Engine& engine, const CheckpointRun& run, Communicator& world) {
        const auto loaded = LoadCheckpoint(made + "/global_step3", engine, world, run);
        REQUIRE_MESSAGE(loaded.ok(), loaded.status().ToString());
        if (!async) {
          REQUIRE(SaveCheckpoint(dir, 3, engine, world, run, SaveOptions{}).ok());
          return;
        }
        AsyncCheckpointBuffers buffers;
        auto started = AsyncCheckpoint::Start(dir, 3, engine, world, run, SaveOptions{}, buffers);
        REQUIRE_MESSAGE(started.ok(), started.status().ToString());
        REQUIRE((*started)->Finish(world).ok());
      });
      CHECK(WholeState(dir + "/global_step3") == state);
      fs::remove_all(dir);
    }
  }
}

TEST_CASE("Exported from any grid, the model file is the same; imported by any grid, the run starts from it") {
  dslaunch::testing::TempDir disk;
  // One trained state, saved by a data-parallel run and by a grid that loaded it (the same bits,
  // above).
  const Shape plain{1, 1, 2, 1};
  TrainConfig config = Config(plain, disk.path() + "/plain");
  config.train.steps = 3;
  Run(plain, config);
  const std::string grid_dir = disk.path() + "/grid";
  OnGridEngines(Shape{2, 2, 8, 1}, false, [&](Engine& engine, const CheckpointRun& run, Communicator& world) {
    REQUIRE(LoadCheckpoint(config.checkpoint.dir + "/global_step3", engine, world, run).ok());
    REQUIRE(SaveCheckpoint(grid_dir, 3, engine, world, run, SaveOptions{}).ok());
  });
  const std::string from_plain = disk.path() + "/plain.safetensors", from_grid = disk.path() + "/grid.safetensors";
  REQUIRE(ExportCheckpoint(config.checkpoint.dir, from_plain, DType::kFloat32).ok());
  const Status exported = ExportCheckpoint(grid_dir, from_grid, DType::kFloat32);
  REQUIRE_MESSAGE(exported.ok(), exported.ToString());
  CHECK(Slurp(from_plain) == Slurp(from_grid));

  // model.init_from: each part takes its pieces of the file. The first step's loss is the
  // data-parallel run's from the same file: bitwise on stages (the same kernels on the same
  // values), within fp32 reassociation on tensor ranks.
  auto started = [&](const Shape& shape) {
    TrainConfig c = Config(shape, "");
    c.checkpoint = CheckpointConfig{};
    c.train.steps = 1;
    c.model_init_from = from_grid;
    return Run(shape, c);
  };
  const TrainResult want = started(plain);
  CHECK(started(Shape{2, 1, 4, 1}).losses == want.losses);
  const TrainResult split = started(Shape{2, 2, 8, 1});
  REQUIRE(split.losses.size() == 1);
  CHECK(split.losses[0] == doctest::Approx(want.losses[0]).epsilon(1e-5));
  // Not the model's own initialisation: the file's trained values.
  TrainConfig fresh = Config(plain, "");
  fresh.checkpoint = CheckpointConfig{};
  fresh.train.steps = 1;
  CHECK(Run(plain, fresh).losses != want.losses);
}

}  // namespace
}  // namespace dslaunch::runtime
