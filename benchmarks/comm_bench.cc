// Collective bandwidth of GlooCommunicator on 127.0.0.1: 2 ranks as threads, 64 MB of fp32 by
// default. Reports time and bus bandwidth as nccl-tests does (allreduce: 2(n-1)/n x bytes / t;
// reduce_scatter and allgather: (n-1)/n x bytes / t), after a warm-up, and checks the results.
// A doctest program (test_endpoint.h checks with doctest), built only with the benchmarks and not
// registered with CTest: run bin/runtime_comm_bench.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <string>

#include "runtime/comm/gloo/communicator.h"
#include "tests/support/test_endpoint.h"

namespace dslaunch::runtime {
namespace {

using Clock = std::chrono::steady_clock;

struct Timing {
  double allreduce_s = 0, reduce_scatter_s = 0, allgather_s = 0, allreduce_copy_s = 0;
};

Status RunRank(const testing::TestEndpoint& ep, int rank, int world, size_t count, int iters,
               Timing& out) {
  auto client = ep.Client();
  GlooOptions options;
  options.address = "127.0.0.1";
  DSLAUNCH_ASSIGN_OR_RETURN(auto comm, GlooCommunicator::Create(*client, rank, world, options));
  std::vector<size_t> counts(world, count / world);
  counts.back() += count % world;
  std::vector<float> data(count, 1.0f), block(counts[rank]), copy(count);
  auto time = [&](auto&& body) -> Result<double> {
    DSLAUNCH_RETURN_IF_ERROR(body());  // warm-up
    DSLAUNCH_RETURN_IF_ERROR(comm->Barrier());
    const auto start = Clock::now();
    for (int i = 0; i < iters; ++i) DSLAUNCH_RETURN_IF_ERROR(body());
    return std::chrono::duration<double>(Clock::now() - start).count() / iters;
  };
  DSLAUNCH_ASSIGN_OR_RETURN(out.allreduce_s,
                            time([&] { return comm->AllReduce(data, ReduceOp::kAvg); }));
  if (data[0] != 1.0f || data.back() != 1.0f) return InternalError("allreduce result wrong");
  DSLAUNCH_ASSIGN_OR_RETURN(out.reduce_scatter_s, time([&] {
                              return comm->ReduceScatter(data, block, counts, ReduceOp::kSum);
                            }));
  if (block[0] != static_cast<float>(world)) return InternalError("reduce_scatter result wrong");
  // The shortcut a ring replaces: allreduce everything, keep one block.
  DSLAUNCH_ASSIGN_OR_RETURN(out.allreduce_copy_s, time([&] {
                              std::copy(data.begin(), data.end(), copy.begin());
                              Status st = comm->AllReduce(copy, ReduceOp::kSum);
                              std::copy_n(copy.begin() + BlockOffsets(counts)[rank], counts[rank],
                                          block.begin());
                              return st;
                            }));
  DSLAUNCH_ASSIGN_OR_RETURN(out.allgather_s,
                            time([&] { return comm->AllGather(block, data, counts); }));
  return Status::Ok();
}

}  // namespace
}  // namespace dslaunch::runtime

TEST_CASE("Gloo collective bandwidth, 64 MB fp32, 2 ranks on 127.0.0.1") {
  using namespace dslaunch::runtime;
  constexpr size_t kMegabytes = 64;  // the figure docs/communicator.md quotes
  constexpr int kWorld = 2;
  constexpr int kIterations = 5;
  const size_t count = kMegabytes * (1u << 20) / sizeof(float);
  dslaunch::testing::TestEndpoint ep;
  std::vector<Timing> timings(kWorld);
  std::vector<std::future<dslaunch::Status>> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r] {
      return RunRank(ep, r, kWorld, count, kIterations, timings[r]);
    }));
  }
  for (auto& f : ranks) {
    dslaunch::Status st = f.get();
    REQUIRE_MESSAGE(st.ok(), st.ToString());
  }
  const double bytes = static_cast<double>(count) * sizeof(float);
  const double n = kWorld;
  const Timing& t = timings[0];
  auto row = [&](const char* name, double seconds, double factor) {
    std::printf("%-26s %8.1f ms  busbw %6.2f GB/s\n", name, seconds * 1e3,
                factor * bytes / seconds / 1e9);
  };
  std::printf("gloo, %d ranks on 127.0.0.1, %zu MB fp32, %d iterations\n", kWorld, kMegabytes,
              kIterations);
  row("allreduce (ring)", t.allreduce_s, 2 * (n - 1) / n);
  row("reduce_scatter (ring)", t.reduce_scatter_s, (n - 1) / n);
  row("reduce_scatter (ar+copy)", t.allreduce_copy_s, (n - 1) / n);
  row("allgather (allgatherv)", t.allgather_s, (n - 1) / n);
}

namespace dslaunch::runtime {
namespace {

// Seconds per call of the training step's two small collectives: the loss all-reduce (3 floats)
// and the all-gather of every rank's step times (2 floats per rank, docs/engine.md "Metrics").
Status RunSmallRank(const testing::TestEndpoint& ep, int rank, int world, int iters, double& allreduce_s,
                    double& allgather_s) {
  auto client = ep.Client();
  GlooOptions options;
  options.address = "127.0.0.1";
  DSLAUNCH_ASSIGN_OR_RETURN(auto comm, GlooCommunicator::Create(*client, rank, world, options));
  float reduced[3] = {1, 0, 0};
  const float mine[2] = {static_cast<float>(rank), 0.5f};
  std::vector<float> all(2 * world);
  auto time = [&](auto&& body) -> Result<double> {
    for (int i = 0; i < 100; ++i) DSLAUNCH_RETURN_IF_ERROR(body());  // warm-up
    DSLAUNCH_RETURN_IF_ERROR(comm->Barrier());
    const auto start = Clock::now();
    for (int i = 0; i < iters; ++i) DSLAUNCH_RETURN_IF_ERROR(body());
    return std::chrono::duration<double>(Clock::now() - start).count() / iters;
  };
  DSLAUNCH_ASSIGN_OR_RETURN(allreduce_s, time([&] {
                              reduced[0] = 1;
                              return comm->AllReduce(std::span<float>(reduced, 3), ReduceOp::kSum);
                            }));
  if (reduced[0] != static_cast<float>(world)) return InternalError("allreduce result wrong");
  DSLAUNCH_ASSIGN_OR_RETURN(allgather_s, time([&] {
                              return comm->AllGather(std::span<const float>(mine, 2), all,
                                                     std::vector<size_t>(world, 2));
                            }));
  for (int r = 0; r < world; ++r) {
    if (all[2 * r] != static_cast<float>(r) || all[2 * r + 1] != 0.5f) return InternalError("allgather result wrong");
  }
  return Status::Ok();
}

}  // namespace
}  // namespace dslaunch::runtime

TEST_CASE("Gloo latency of the step's small collectives, 2 ranks on 127.0.0.1") {
  using namespace dslaunch::runtime;
  constexpr int kWorld = 2;
  constexpr int kIterations = 2000;
  dslaunch::testing::TestEndpoint ep;
  std::vector<double> allreduce(kWorld), allgather(kWorld);
  std::vector<std::future<dslaunch::Status>> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r] {
      return RunSmallRank(ep, r, kWorld, kIterations, allreduce[r], allgather[r]);
    }));
  }
  for (auto& f : ranks) {
    dslaunch::Status st = f.get();
    REQUIRE_MESSAGE(st.ok(), st.ToString());
  }
  std::printf("gloo, %d ranks on 127.0.0.1, %d iterations\n", kWorld, kIterations);
  std::printf("%-34s %8.1f us\n", "allreduce of 3 floats (the loss)", allreduce[0] * 1e6);
  std::printf("%-34s %8.1f us\n", "allgather of 2 floats per rank", allgather[0] * 1e6);
}
