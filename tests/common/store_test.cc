// Proc tests of the rendezvous store: a real Endpoint + StoreService on 127.0.0.1, real clients.
#include "common/store_client.h"

#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "tests/support/test_endpoint.h"

namespace dslaunch {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;
using testing::TestEndpoint;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// How long a test waits for a client's request to reach the store: generous, it takes microseconds.
constexpr milliseconds kParkTimeout{10000};

// Waits until exactly `n` gets or waits are parked in the store (their requests have arrived and
// are waiting for keys); false if that does not happen within kParkTimeout.
bool WaitUntilParked(TestEndpoint& ep, size_t n) {
  const auto deadline = Clock::now() + kParkTimeout;
  while (ep.OnIo([&] { return ep.store().store().num_waiters(); }) != n) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

TEST_CASE("StoreClient round-trips every operation through a real endpoint") {
  TestEndpoint ep;
  auto c = ep.Client();
  REQUIRE(c->Set("k", std::string("v\0x", 3)).ok());
  CHECK(*c->Get("k", milliseconds(0)) == std::string("v\0x", 3));
  CHECK(*c->Add("n", 2) == 2);
  CHECK(*c->Add("n", 3) == 5);
  CHECK(*c->Get("n", milliseconds(0)) == "5");
  CHECK(*c->CompareSet("k", std::string("v\0x", 3), "w") == "w");
  CHECK(*c->CompareSet("k", "stale", "z") == "w");
  CHECK(*c->Check({"k", "n"}));
  CHECK_FALSE(*c->Check({"k", "missing"}));
  CHECK(c->Wait({"k", "n"}, milliseconds(100)).ok());
  CHECK(*c->NumKeys() == 2);
  CHECK(*c->Delete("k"));
  CHECK_FALSE(*c->Delete("k"));
  CHECK(*c->NumKeys() == 1);
  Status bad = c->Add("missing-counter-is-fine", 1).status();
  CHECK(bad.ok());
  REQUIRE(c->Set("text", "abc").ok());
  Status not_counter = c->Add("text", 1).status();
  CHECK(not_counter.code() == StatusCode::kFailedPrecondition);
  CHECK(not_counter.message().find("'text'") != std::string::npos);
  CHECK(not_counter.message().find(ep.address()) != std::string::npos);
  // The wire keys carry the generation prefix.
  CHECK(ep.OnIo([&] { return ep.store().store().Get("gen/0/n") != nullptr; }));
  CHECK(ep.Stop());
}

TEST_CASE("256 concurrent clients set, add and get through one endpoint") {
  constexpr int kClients = 256;
  TestEndpoint ep;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  auto start = Clock::now();
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto c = StoreClient::Connect(ep.Config(), Clock::now() + seconds(20));
      if (!c.ok()) {
        ++failures;
        return;
      }
      StoreClient& client = **c;
      bool ok = client.Set("rank/" + std::to_string(i), "value-" + std::to_string(i)).ok();
      ok = ok && client.Add("arrived", 1).ok();
      // Blocks until the neighbour (another thread) has set its key.
      int next = (i + 1) % kClients;
      auto v = client.Get("rank/" + std::to_string(next), milliseconds(15000));
      ok = ok && v.ok() && *v == "value-" + std::to_string(next);
      if (!ok) ++failures;
    });
  }
  for (auto& t : threads) t.join();
  MESSAGE("256 clients done in " << SecondsSince(start) << " s");
  CHECK(failures == 0);
  auto c = ep.Client();
  CHECK(*c->Get("arrived", milliseconds(0)) == std::to_string(kClients));
  CHECK(*c->NumKeys() == kClients + 1);
  CHECK(ep.Stop());
}

TEST_CASE("A blocking get is woken by a set from another client") {
  TestEndpoint ep;
  auto waiter = ep.Client();
  auto setter = ep.Client();
  auto start = Clock::now();
  auto got =
      std::async(std::launch::async, [&] { return waiter->Get("late", milliseconds(10000)); });
  REQUIRE(WaitUntilParked(ep, 1));
  REQUIRE(setter->Set("late", "here").ok());
  auto v = got.get();
  REQUIRE(v.ok());
  CHECK(*v == "here");
  CHECK(SecondsSince(start) < 5.0);
  // A wait for several keys is woken by the last one.
  auto waited = std::async(std::launch::async, [&] {
    return waiter->Wait({"a", "b"}, milliseconds(10000));
  });
  REQUIRE(WaitUntilParked(ep, 1));
  REQUIRE(setter->Set("a", "1").ok());
  // The set has been applied (its reply came back) and the wait is still parked: not woken by "a".
  CHECK(ep.OnIo([&] { return ep.store().store().num_waiters(); }) == 1);
  CHECK(waited.wait_for(milliseconds(0)) == std::future_status::timeout);
  REQUIRE(setter->Add("b", 1).ok());
  CHECK(waited.get().ok());
  CHECK(WaitUntilParked(ep, 0));
}

TEST_CASE(
    "Get and wait fail with kDeadlineExceeded at their timeout and the connection stays usable") {
  TestEndpoint ep;
  auto c = ep.Client();
  auto start = Clock::now();
  auto v = c->Get("never", milliseconds(200));
  double elapsed = SecondsSince(start);
  CHECK(v.status().code() == StatusCode::kDeadlineExceeded);
  CHECK(v.status().message().find("'never'") != std::string::npos);
  CHECK(v.status().message().find(ep.address()) != std::string::npos);
  CHECK(elapsed >= 0.19);
  CHECK(elapsed < 2.0);

  REQUIRE(c->Set("present", "1").ok());
  start = Clock::now();
  Status w = c->Wait({"present", "absent"}, milliseconds(200));
  elapsed = SecondsSince(start);
  CHECK(w.code() == StatusCode::kDeadlineExceeded);
  CHECK(w.message().find("absent") != std::string::npos);
  CHECK(elapsed >= 0.19);
  CHECK(elapsed < 2.0);

  CHECK(c->Get("never", milliseconds(0)).status().code() == StatusCode::kDeadlineExceeded);
  CHECK(*c->Get("present", milliseconds(0)) == "1");
  CHECK(ep.OnIo([&] { return ep.store().store().num_waiters(); }) == 0);
}

TEST_CASE("Keys of one generation are invisible to another") {
  TestEndpoint ep;
  auto gen0 = ep.Client(0);
  auto gen1 = ep.Client(1);
  REQUIRE(gen0->Set("nccl_id", "old").ok());
  CHECK(gen1->Get("nccl_id", milliseconds(0)).status().code() == StatusCode::kDeadlineExceeded);
  REQUIRE(gen1->Set("nccl_id", "new").ok());
  CHECK(*gen0->Get("nccl_id", milliseconds(0)) == "old");
  CHECK(*gen1->Get("nccl_id", milliseconds(0)) == "new");
  CHECK(*gen0->NumKeys() == 1);
  CHECK(ep.OnIo([&] { return ep.store().DeletePrefix("gen/0/"); }) == 1);
  CHECK(*gen0->NumKeys() == 0);
  CHECK(*gen1->NumKeys() == 1);
}

TEST_CASE("StoreBarrier releases every participant and names the stragglers' count on timeout") {
  TestEndpoint ep;
  constexpr int kWorld = 8;
  std::vector<std::future<Status>> results;
  for (int i = 0; i < kWorld; ++i) {
    results.push_back(std::async(std::launch::async, [&] {
      auto c = StoreClient::Connect(ep.Config(), Clock::now() + seconds(10));
      if (!c.ok()) return c.status();
      return StoreBarrier(**c, "start", kWorld, milliseconds(10000));
    }));
  }
  for (auto& r : results) {
    Status st = r.get();
    CHECK_MESSAGE(st.ok(), st.ToString());
  }
  auto c = ep.Client();
  Status late = StoreBarrier(*c, "start", kWorld, milliseconds(100));
  CHECK(late.code() == StatusCode::kFailedPrecondition);
  Status alone = StoreBarrier(*c, "lonely", 3, milliseconds(200));
  CHECK(alone.code() == StatusCode::kDeadlineExceeded);
  CHECK(alone.message().find("only 1 of 3") != std::string::npos);
}

TEST_CASE("The launcher's in-process Set wakes a parked client") {
  TestEndpoint ep;
  auto c = ep.Client(2);
  auto got =
      std::async(std::launch::async, [&] { return c->Get("from-launcher", milliseconds(10000)); });
  REQUIRE(WaitUntilParked(ep, 1));
  REQUIRE(ep.OnIo([&] { return ep.store().Set("gen/2/from-launcher", "hello"); }).ok());
  auto v = got.get();
  REQUIRE(v.ok());
  CHECK(*v == "hello");
}

TEST_CASE("Endpoint::Stop fails a parked get promptly and lets io_context::run return") {
  TestEndpoint ep;
  auto c = ep.Client();
  auto start = Clock::now();
  auto got = std::async(std::launch::async, [&] { return c->Get("never", milliseconds(30000)); });
  REQUIRE(WaitUntilParked(ep, 1));
  CHECK(ep.Stop());  // true: run() returned by itself, no timers or sockets left behind
  auto v = got.get();
  CHECK(v.status().code() == StatusCode::kUnavailable);
  CHECK(SecondsSince(start) < 5.0);
}

}  // namespace
}  // namespace dslaunch
