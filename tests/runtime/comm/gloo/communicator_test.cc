// Real Gloo through a real store endpoint: ranks as threads on 127.0.0.1, every collective against
// the thread fake's results, and a dead or stalled peer failing the others in bounded time.
#include "common/route.h"
#include "runtime/comm/gloo/communicator.h"
#include "runtime/comm/gloo/grid_communicators.h"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <functional>
#include <future>
#include <thread>

#include "tests/fakes/thread_communicator.h"
#include "tests/runtime/comm/collective_script.h"
#include "tests/runtime/comm/pipeline_exchange.h"
#include "tests/support/test_endpoint.h"

namespace dslaunch::runtime::testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using dslaunch::testing::TestEndpoint;

// Forming a mesh of threads on loopback takes milliseconds; this only bounds a broken test.
constexpr milliseconds kConnectTimeout{10000};

GlooOptions LoopbackOptions(milliseconds collective_timeout, int context_id = 0) {
  GlooOptions options;
  options.address = "127.0.0.1";
  options.context_id = context_id;
  options.connect_timeout = kConnectTimeout;
  options.collective_timeout = collective_timeout;
  return options;
}

// Runs `body(rank, comm)` for ranks 0..ranks-1 of a Gloo group of `world` (default: `ranks`), each
// on its own thread with its own store client; returns each rank's status (a Create failure is
// returned as the rank's status).
std::vector<Status> RunGlooRanks(
    const TestEndpoint& ep, int ranks, GlooOptions options,
    const std::function<Status(int, std::unique_ptr<GlooCommunicator>&)>& body, int world = 0) {
  if (world == 0) world = ranks;
  std::vector<std::future<Status>> futures;
  for (int r = 0; r < ranks; ++r) {
    futures.push_back(std::async(std::launch::async, [&, r, world]() -> Status {
      auto client = ep.Client();
      auto comm = GlooCommunicator::Create(*client, r, world, options);
      if (!comm.ok()) return comm.status();
      return body(r, *comm);
    }));
  }
  std::vector<Status> statuses;
  for (auto& f : futures) statuses.push_back(f.get());
  return statuses;
}

TEST_CASE("GlooCommunicator matches the thread fake on every collective for 2 to 4 ranks") {
  TestEndpoint ep;
  for (int world = 2; world <= 4; ++world) {
    CAPTURE(world);
    ThreadCommunicatorGroup group(world);
    std::vector<ScriptOutputs> fake(world), gloo(world);
    std::vector<std::future<Status>> fake_ranks;
    for (int r = 0; r < world; ++r) {
      fake_ranks.push_back(std::async(
          std::launch::async, [&, r] { return RunCollectiveScript(group.Get(r), fake[r]); }));
    }
    for (auto& f : fake_ranks) REQUIRE(f.get().ok());
    auto statuses = RunGlooRanks(ep, world, LoopbackOptions(milliseconds(10000), world),
                                 [&](int r, std::unique_ptr<GlooCommunicator>& comm) {
                                   return RunCollectiveScript(*comm, gloo[r]);
                                 });
    for (int r = 0; r < world; ++r) {
      CAPTURE(r);
      REQUIRE_MESSAGE(statuses[r].ok(), statuses[r].ToString());
      REQUIRE(gloo[r].results.size() == fake[r].results.size());
      for (size_t step = 0; step < fake[r].results.size(); ++step) {
        CAPTURE(step);
        CHECK(gloo[r].results[step] == fake[r].results[step]);
      }
      CHECK(gloo[r].ints == fake[r].ints);
      CHECK(gloo[r].ints == ExpectedScript(world, r).ints);
    }
  }
}

TEST_CASE("Gloo Send and Recv carry a 1F1B and a GPipe step's messages in order on 2 to 4 stages") {
  TestEndpoint ep;
  int context = 100;
  for (PipeSchedule schedule : {PipeSchedule::k1F1B, PipeSchedule::kGPipe}) {
    for (int stages = 2; stages <= 4; ++stages) {
      CAPTURE(PipeScheduleName(schedule));
      CAPTURE(stages);
      auto statuses = RunGlooRanks(ep, stages, LoopbackOptions(milliseconds(10000), context++),
                                   [&](int, std::unique_ptr<GlooCommunicator>& comm) -> Status {
                                     // Two steps: tags continue across FlushSends.
                                     DSLAUNCH_RETURN_IF_ERROR(RunPipelineExchange(*comm, schedule, 8));
                                     return RunPipelineExchange(*comm, schedule, 5);
                                   });
      for (const Status& st : statuses) CHECK_MESSAGE(st.ok(), st.ToString());
    }
  }
}

TEST_CASE("A Recv whose peer sends nothing fails after the timeout naming the peer") {
  TestEndpoint ep;
  auto statuses = RunGlooRanks(ep, 2, LoopbackOptions(milliseconds(500), 200),
                               [&](int r, std::unique_ptr<GlooCommunicator>& comm) -> Status {
                                 if (r == 1) return comm->Barrier();
                                 DSLAUNCH_RETURN_IF_ERROR(comm->Barrier());
                                 std::vector<float> data(16);
                                 return comm->Recv(data, 1);
                               });
  CHECK(statuses[1].ok());
  CHECK(statuses[0].code() == StatusCode::kAborted);
  CHECK_MESSAGE(statuses[0].message().find("gloo recv on rank 0/2: failed with rank 1") == 0, statuses[0].message());
}

TEST_CASE("A 2 x 2 x 2 grid forms its pipeline, data and tensor groups, each reducing over its own members") {
  TestEndpoint ep;
  const ProcessGrid grid = *ProcessGrid::Create(8, 2, 2);
  std::vector<std::future<Status>> ranks;
  for (int r = 0; r < 8; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r]() -> Status {
      auto client = ep.Client();
      DSLAUNCH_ASSIGN_OR_RETURN(GridCommunicators comms,
                                CreateGridCommunicators(*client, grid, r, LoopbackOptions(milliseconds(10000))));
      const std::pair<GridAxis, GlooCommunicator*> axes[] = {{GridAxis::kPipeline, comms.pipeline.get()},
                                                             {GridAxis::kData, comms.data.get()},
                                                             {GridAxis::kTensor, comms.tensor.get()}};
      for (auto [axis, comm] : axes) {
        const std::vector<int> members = grid.GroupOf(r, axis);
        if (comm->world_size() != 2 || members[comm->rank()] != r) {
          return InternalError(std::string(GridAxisName(axis)) + ": rank " + std::to_string(comm->rank()) + "/" +
                               std::to_string(comm->world_size()));
        }
        std::vector<float> value = {static_cast<float>(r)};
        DSLAUNCH_RETURN_IF_ERROR(comm->AllReduce(value, ReduceOp::kSum));
        if (value[0] != static_cast<float>(members[0] + members[1])) {
          return InternalError(std::string(GridAxisName(axis)) + " sum " + std::to_string(value[0]));
        }
      }
      // The pipeline group carries a stage's output to the next stage.
      std::vector<float> activation = {static_cast<float>(100 + r)};
      if (grid.NextStage(r) >= 0) {
        DSLAUNCH_RETURN_IF_ERROR(comms.pipeline->Send(std::span<const float>(activation), 1));
        return comms.pipeline->FlushSends();
      }
      DSLAUNCH_RETURN_IF_ERROR(comms.pipeline->Recv(activation, 0));
      if (activation[0] != static_cast<float>(100 + grid.PreviousStage(r))) return InternalError("activation");
      return Status::Ok();
    }));
  }
  for (int r = 0; r < 8; ++r) {
    CAPTURE(r);
    const Status st = ranks[r].get();
    CHECK_MESSAGE(st.ok(), st.ToString());
  }
  CHECK(GridContextId(grid, 5, GridAxis::kTensor) != GridContextId(grid, 5, GridAxis::kData));
}

TEST_CASE("A peer that closes mid-run fails the others quickly with kAborted naming it") {
  TestEndpoint ep;
  constexpr milliseconds kTimeout{3000};
  constexpr int kWorld = 3;
  std::vector<milliseconds> took(kWorld);
  auto statuses =
      RunGlooRanks(ep, kWorld, LoopbackOptions(kTimeout),
                   [&](int r, std::unique_ptr<GlooCommunicator>& comm) -> Status {
                     DSLAUNCH_RETURN_IF_ERROR(comm->Barrier());
                     if (r == 2) {
                       comm.reset();  // closes every socket, as an exiting process would
                       return Status::Ok();
                     }
                     std::vector<float> data(1 << 20, 1.0f);
                     const auto begin = Clock::now();
                     Status st = comm->AllReduce(data, ReduceOp::kSum);
                     took[r] = std::chrono::duration_cast<milliseconds>(Clock::now() - begin);
                     Status again = comm->Barrier();
                     if (again.code() != StatusCode::kAborted)
                       return InternalError("later call: " + again.ToString());
                     return st;
                   });
  CHECK(statuses[2].ok());
  for (int r : {0, 1}) {
    CAPTURE(r);
    MESSAGE(statuses[r].ToString());
    CHECK(statuses[r].code() == StatusCode::kAborted);
    CHECK(statuses[r].message().find("rank 2") != std::string::npos);
    CHECK(took[r] < 2 * kTimeout);
  }
}

// Reads everything the other end of `fd` writes until it closes it.
std::string ReadAll(int fd) {
  std::string text;
  char buf[256];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

TEST_CASE("A peer process killed with SIGKILL mid-collective fails the others within the bound") {
  constexpr milliseconds kTimeout{3000};
  constexpr int kWorld = 3;
  constexpr size_t kCount =
      1 << 22;  // 16 MB: each allreduce takes tens of ms, so a kill lands mid-call
  // Rank 2 runs in its own process, forked before this one starts any thread (the endpoint's I/O
  // thread, the ranks, Gloo's): a child forked beside running threads may inherit a lock one of
  // them held (malloc's, say) and hang. It learns the endpoint's port through a pipe.
  int port_pipe[2];
  REQUIRE(::pipe2(port_pipe, O_CLOEXEC) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // allreduce until killed
    ::close(port_pipe[1]);
    const std::string port = ReadAll(port_pipe[0]);
    if (port.empty()) _exit(4);  // the parent failed before starting the endpoint
    auto client = StoreClient::Connect({"127.0.0.1:" + port, dslaunch::testing::kTestJobId, 0,
                                        dslaunch::testing::kTestSecret},
                                       Clock::now() + kConnectTimeout);
    if (!client.ok()) _exit(1);
    auto comm = GlooCommunicator::Create(**client, 2, kWorld, LoopbackOptions(kTimeout));
    if (!comm.ok()) _exit(2);
    std::vector<float> data(kCount, 1.0f);
    while ((*comm)->AllReduce(data, ReduceOp::kMax).ok()) {
    }
    _exit(3);
  }
  ::close(port_pipe[0]);
  struct ChildGuard {  // the child does not outlive a failed check
    pid_t pid;
    bool reaped = false;
    ~ChildGuard() {
      if (reaped) return;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } guard{child};
  int wstatus = 0;
  std::atomic<int> iterations{0};
  std::atomic<bool> ranks_done{false};
  Clock::time_point killed_at;
  std::vector<Clock::time_point> failed_at(2);
  std::vector<Status> statuses;
  {
    TestEndpoint ep;
    const std::string port = std::to_string(ep.port());
    REQUIRE(::write(port_pipe[1], port.data(), port.size()) == static_cast<ssize_t>(port.size()));
    ::close(port_pipe[1]);
    std::thread killer([&] {
      // Until the ranks have run a few allreduces with the child; bounded, in case they never do.
      const auto deadline = Clock::now() + 2 * kConnectTimeout;
      while (iterations.load() < 6 && !ranks_done.load() && Clock::now() < deadline) {
        std::this_thread::sleep_for(milliseconds(5));
      }
      killed_at = Clock::now();
      ::kill(child, SIGKILL);
    });
    statuses = RunGlooRanks(
        ep, kWorld - 1, LoopbackOptions(kTimeout),
        [&](int r, std::unique_ptr<GlooCommunicator>& comm) {
          std::vector<float> data(kCount, 1.0f);
          Status st;
          while ((st = comm->AllReduce(data, ReduceOp::kMax)).ok()) iterations++;
          failed_at[r] = Clock::now();
          return st;
        },
        kWorld);
    ranks_done = true;
    killer.join();
    guard.reaped = ::waitpid(child, &wstatus, 0) == child;
  }
  REQUIRE(guard.reaped);
  CHECK(iterations.load() >= 6);  // the kill came mid-run, not after a failure to start
  CHECK(WIFSIGNALED(wstatus));
  for (int r : {0, 1}) {
    CAPTURE(r);
    MESSAGE(statuses[r].ToString());
    CHECK(statuses[r].code() == StatusCode::kAborted);
    CHECK(statuses[r].message().find("rank 2") != std::string::npos);
    CHECK(failed_at[r] - killed_at < 2 * kTimeout);
  }
}

TEST_CASE("A stalled peer fails reduce_scatter after the collective timeout, naming it") {
  TestEndpoint ep;
  constexpr milliseconds kTimeout{1000};
  std::promise<void> release;
  auto released = release.get_future().share();
  std::vector<milliseconds> took(2);
  auto statuses = RunGlooRanks(ep, 2, LoopbackOptions(kTimeout),
                               [&](int r, std::unique_ptr<GlooCommunicator>& comm) -> Status {
                                 if (r == 1) {
                                   released.wait();  // stalls until rank 0 has given up
                                   return Status::Ok();
                                 }
                                 std::vector<float> in(10, 1.0f), out(5);
                                 const auto begin = Clock::now();
                                 Status st = comm->ReduceScatter(in, out, {5, 5}, ReduceOp::kSum);
                                 took[r] =
                                     std::chrono::duration_cast<milliseconds>(Clock::now() - begin);
                                 release.set_value();
                                 return st;
                               });
  MESSAGE(statuses[0].ToString());
  CHECK(statuses[0].code() == StatusCode::kAborted);
  CHECK(statuses[0].message().find("rank 1") != std::string::npos);
  CHECK(took[0] >= kTimeout - milliseconds(50));
  CHECK(took[0] < 2 * kTimeout);
}

TEST_CASE("GlooCommunicator::Create needs exactly one of address and interface") {
  TestEndpoint ep;
  auto client = ep.Client();
  GlooOptions options;
  auto comm = GlooCommunicator::Create(*client, 0, 1, options);
  CHECK(comm.status().code() == StatusCode::kInvalidArgument);
  options.address = "127.0.0.1";
  options.interface = "lo";
  comm = GlooCommunicator::Create(*client, 0, 1, options);
  CHECK(comm.status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("SourceAddressToward picks the local address of the route to the store") {
  auto addr = SourceAddressToward("127.0.0.1:29500");
  REQUIRE_MESSAGE(addr.ok(), addr.status().ToString());
  CHECK(*addr == "127.0.0.1");
  CHECK(SourceAddressToward("no-port").status().code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dslaunch::runtime::testing
