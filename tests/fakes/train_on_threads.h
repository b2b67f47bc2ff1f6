// Train() on N in-process ranks (ThreadCommunicatorGroup), data parallel or on a process grid, and
// a small token set with something to learn: the helpers of the trainer, checkpoint and export
// tests.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "common/process_grid.h"
#include "runtime/train/trainer.h"
#include "tests/fakes/thread_communicator.h"

namespace dslaunch::runtime::testing {

// 4000 training tokens of a repeating pattern with noise (ids < 32) and, with `validation`, 600
// tokens of the pattern alone.
inline TrainData PatternTokens(bool validation) {
  TrainData d;
  uint32_t x = 12345;
  for (int i = 0; i < 4000; ++i) {
    x = x * 1664525u + 1013904223u;
    d.train.push_back(static_cast<uint16_t>((i % 7) * 4 + (x >> 30)));
  }
  if (validation) {
    for (int i = 0; i < 600; ++i) d.val.push_back(static_cast<uint16_t>((i % 7) * 4));
  }
  return d;
}

// Runs `config` on `world` threads, rank r with hooks_for(r) (no output when empty); returns every
// rank's result. `comm_for(r, inner)`, when given, is the communicator rank r trains through, made
// on its thread around the thread communicator `inner` (a RecordingCommunicator, say); it must
// stay alive until this returns.
inline std::vector<Result<TrainResult>> TrainOnThreads(
    int world, const TrainConfig& config, const TrainData& data,
    const std::function<TrainHooks(int rank)>& hooks_for = {},
    const std::function<Communicator&(int rank, Communicator& inner)>& comm_for = {}) {
  ThreadCommunicatorGroup group(world, std::chrono::seconds(30));
  std::vector<Result<TrainResult>> results(static_cast<size_t>(world), Status(StatusCode::kInternal, "not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      Communicator& comm = comm_for ? comm_for(r, group.Get(r)) : group.Get(r);
      results[static_cast<size_t>(r)] = Train(config, data, comm, hooks_for ? hooks_for(r) : TrainHooks{});
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

// The in-process communicators of a process grid: the world's, and one group per pipeline, data
// and tensor group, so that each rank has its ModelParallelRun.
class ThreadGrid {
 public:
  explicit ThreadGrid(const ProcessGrid& grid) : grid_(grid), world_(grid.world_size(), std::chrono::seconds(30)) {
    for (int a = 0; a < 3; ++a) {
      for (int i = 0; i < grid.GroupCount(kAxes[a]); ++i) {
        groups_[a].push_back(std::make_unique<ThreadCommunicatorGroup>(grid.Size(kAxes[a]), std::chrono::seconds(30)));
      }
    }
  }
  Communicator& World(int rank) { return world_.Get(rank); }
  ModelParallelRun RunOf(int rank) {
    const GridCoordinates at = grid_.CoordinatesOf(rank);
    auto member = [&](int a) -> Communicator* {
      return &groups_[a][static_cast<size_t>(grid_.GroupIndex(rank, kAxes[a]))]->Get(at.Along(kAxes[a]));
    };
    return ModelParallelRun{grid_, member(0), member(1), member(2)};
  }

 private:
  static constexpr GridAxis kAxes[3] = {GridAxis::kPipeline, GridAxis::kData, GridAxis::kTensor};
  const ProcessGrid grid_;
  ThreadCommunicatorGroup world_;
  std::vector<std::unique_ptr<ThreadCommunicatorGroup>> groups_[3];  // per axis, per group
};

// Runs `config` on `world` threads as TrainOnThreads does, split over the grid of its
// pipeline.stages and tensor_parallel.autotp_size (docs/parallelism.md); without stages or tensor
// ranks, plain data parallel.
inline std::vector<Result<TrainResult>> TrainOnGrid(int world, const TrainConfig& config, const TrainData& data,
                                                    const std::function<TrainHooks(int rank)>& hooks_for = {}) {
  const int stages = config.pipeline.stages, tensor = config.tensor_parallel.size;
  if (stages == 1 && tensor == 1) return TrainOnThreads(world, config, data, hooks_for);
  ThreadGrid groups(*ProcessGrid::Create(world, stages, tensor));
  std::vector<ModelParallelRun> runs;
  for (int r = 0; r < world; ++r) runs.push_back(groups.RunOf(r));
  std::vector<Result<TrainResult>> results(static_cast<size_t>(world), Status(StatusCode::kInternal, "not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      TrainHooks hooks = hooks_for ? hooks_for(r) : TrainHooks{};
      hooks.model_parallel = &runs[static_cast<size_t>(r)];
      results[static_cast<size_t>(r)] = Train(config, data, groups.World(r), hooks);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace dslaunch::runtime::testing
