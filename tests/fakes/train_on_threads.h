// Train() on N in-process ranks (ThreadCommunicatorGroup), and a small token set with something to
// learn: the helpers of the trainer, checkpoint and export tests.
#pragma once

#include <chrono>
#include <functional>
#include <thread>
#include <vector>

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

}  // namespace dslaunch::runtime::testing
