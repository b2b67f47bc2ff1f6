// The NCCL unique id through a real store endpoint on 127.0.0.1: ranks as threads, each with its
// own store client, as the workers of a node would be. No NCCL here (the id is any 128 bytes);
// unique_id_nccl_test.cc sends a real ncclGetUniqueId's id the same way.
#include "runtime/comm/nccl/unique_id_exchange.h"

#include <doctest/doctest.h>

#include <atomic>
#include <future>
#include <thread>

#include "tests/support/test_endpoint.h"

namespace dslaunch::runtime {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using dslaunch::testing::TestEndpoint;

// Long enough never to expire in a test that expects an answer; a wait that ends early because of
// an error or a stop is checked against a fraction of it.
constexpr milliseconds kLongTimeout{20000};

// Waits until `n` GETs are parked at the store (the ranks are waiting for the id), instead of
// guessing how long that takes.
void WaitForParkedGets(TestEndpoint& ep, size_t n) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (ep.OnIo([&] { return ep.store().store().num_waiters(); }) != n) {
    REQUIRE_MESSAGE(Clock::now() < deadline, "fewer than " << n << " GETs parked at the store after 10 s");
    std::this_thread::sleep_for(milliseconds(5));
  }
}

NcclUniqueIdBytes Pattern(char seed) {
  NcclUniqueIdBytes id;
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(seed + i * 13);
  return id;
}

TEST_CASE("Every rank reads the id rank 0 made, also when rank 0 publishes after the others wait") {
  TestEndpoint ep;
  constexpr int kWorld = 4;
  UniqueIdExchangeOptions options{.context_id = 0, .timeout = kLongTimeout};
  std::atomic<int> made{0};
  auto make = [&]() -> Result<NcclUniqueIdBytes> {
    ++made;
    return Pattern('a');
  };
  std::vector<std::future<Result<NcclUniqueIdBytes>>> others;
  for (int r = 1; r < kWorld; ++r) {
    others.push_back(std::async(std::launch::async, [&, r] {
      auto client = ep.Client();
      return ExchangeUniqueId(*client, r, make, options);
    }));
  }
  // Rank 0 is the slowest to start: the others are already waiting on the key.
  WaitForParkedGets(ep, kWorld - 1);
  auto client = ep.Client();
  auto zero = ExchangeUniqueId(*client, 0, make, options);
  REQUIRE_MESSAGE(zero.ok(), zero.status().ToString());
  CHECK(*zero == Pattern('a'));
  for (auto& f : others) {
    auto id = f.get();
    REQUIRE_MESSAGE(id.ok(), id.status().ToString());
    CHECK(*id == Pattern('a'));
  }
  CHECK(made == 1);  // only rank 0 makes an id
}

TEST_CASE("Two communicators of one generation exchange two ids under their own keys") {
  TestEndpoint ep;
  auto run = [&](int rank, int context, char seed) {
    auto client = ep.Client();
    return ExchangeUniqueId(*client, rank, [seed]() -> Result<NcclUniqueIdBytes> { return Pattern(seed); },
                            {.context_id = context, .timeout = kLongTimeout});
  };
  REQUIRE(run(0, 0, 'x').ok());
  REQUIRE(run(0, 1, 'y').ok());
  auto first = run(1, 0, '?');
  auto second = run(1, 1, '?');
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  CHECK(*first == Pattern('x'));
  CHECK(*second == Pattern('y'));
}

TEST_CASE("A rank 0 that cannot make an id fails every rank at once with its reason") {
  TestEndpoint ep;
  auto waiting = std::async(std::launch::async, [&] {
    auto client = ep.Client();
    const auto start = Clock::now();
    auto id = ExchangeUniqueId(*client, 2, [] { return Result<NcclUniqueIdBytes>(Pattern('?')); },
                               {.timeout = kLongTimeout});
    return std::pair{id.status(), Clock::now() - start};
  });
  WaitForParkedGets(ep, 1);
  auto client = ep.Client();
  auto zero = ExchangeUniqueId(
      *client, 0, [] { return Result<NcclUniqueIdBytes>(UnavailableError("ncclGetUniqueId: no network interface")); },
      {.timeout = kLongTimeout});
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.status().message().find("making it: ncclGetUniqueId: no network interface") != std::string::npos);

  auto [status, waited] = waiting.get();
  REQUIRE_FALSE(status.ok());
  CHECK(status.code() == StatusCode::kUnavailable);
  CHECK(status.message().find("rank 2: NCCL unique id 'gen/0/nccl/ctx0/unique_id'") != std::string::npos);
  CHECK(status.message().find("ncclGetUniqueId: no network interface") != std::string::npos);
  CHECK(waited < kLongTimeout / 4);
}

TEST_CASE("A rank whose rank 0 never publishes gives up at its deadline and says what to look at") {
  TestEndpoint ep;
  auto client = ep.Client();
  const auto start = Clock::now();
  auto id = ExchangeUniqueId(*client, 1, [] { return Result<NcclUniqueIdBytes>(Pattern('?')); },
                             {.timeout = milliseconds(400)});
  const auto waited = Clock::now() - start;
  REQUIRE_FALSE(id.ok());
  CHECK(id.status().code() == StatusCode::kUnavailable);
  CHECK(id.status().message().find("not published within 0.4 s (is rank 0 running?") != std::string::npos);
  CHECK(waited >= milliseconds(400));
}

TEST_CASE("A stop while waiting for the id ends the wait with kAborted") {
  TestEndpoint ep;
  std::atomic<bool> stop{false};
  auto waiting = std::async(std::launch::async, [&] {
    auto client = ep.Client();
    auto id = ExchangeUniqueId(*client, 3, [] { return Result<NcclUniqueIdBytes>(Pattern('?')); },
                               {.timeout = kLongTimeout, .stop = &stop});
    return std::pair{id.status(), Clock::now()};
  });
  WaitForParkedGets(ep, 1);
  const auto stopped = Clock::now();
  stop.store(true);
  auto [status, returned] = waiting.get();
  REQUIRE_FALSE(status.ok());
  CHECK(status.code() == StatusCode::kAborted);
  CHECK(status.message().find("stopped while waiting") != std::string::npos);
  // The GET in progress ends at its slice; the next look at the flag returns.
  CHECK(returned - stopped < 4 * kUniqueIdStopPoll);
}

TEST_CASE("A record that is not an id fails the reader with kDataLoss") {
  TestEndpoint ep;
  auto client = ep.Client();
  REQUIRE(client->Set(NcclUniqueIdKey(0), "not an id").ok());
  auto id = ExchangeUniqueId(*client, 1, [] { return Result<NcclUniqueIdBytes>(Pattern('?')); },
                             {.timeout = kLongTimeout});
  REQUIRE_FALSE(id.ok());
  CHECK(id.status().code() == StatusCode::kDataLoss);
  CHECK(id.status().message().find("rank 1: ") == 0);
}

}  // namespace
}  // namespace dslaunch::runtime
