// Proc tests of the rendezvous store: a real Endpoint + StoreService on 127.0.0.1, real clients.
#include "common/store/store_client.h"

#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "common/endpoint/endpoint_client.h"
#include "common/message_types.h"
#include "common/store/store_protocol.h"
#include "tests/support/test_endpoint.h"

namespace dslaunch {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;
using testing::kTestJobId;
using testing::kTestSecret;
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

TEST_CASE("A value of several MiB, sent faster than the endpoint reads it, round-trips") {
  // The endpoint reads a chunk per wake-up; what is left in the socket must still be read when
  // no more bytes arrive (an edge-triggered wait would sleep on it for ever).
  TestEndpoint ep;
  auto c = ep.Client();
  std::string big(6u << 20, 'v');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>('a' + i / 4096 % 26);
  REQUIRE(c->Set("big", big).ok());
  auto back = c->Get("big", milliseconds(0));
  REQUIRE(back.ok());
  CHECK(*back == big);
  // The whole request is in the socket before the endpoint looks: its thread is busy meanwhile.
  std::thread busy([&] { ep.OnIo([] { std::this_thread::sleep_for(milliseconds(500)); return 0; }); });
  std::this_thread::sleep_for(milliseconds(100));
  const std::string mid(200u << 10, 'm');
  REQUIRE(c->Set("mid", mid).ok());
  busy.join();
  CHECK(*c->Get("mid", milliseconds(0)) == mid);
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

void BeginGeneration(TestEndpoint& ep, int generation) {
  ep.OnIo([&] { ep.endpoint().BeginGeneration(generation); });
}

TEST_CASE("Keys of one generation are invisible to the next") {
  TestEndpoint ep;
  auto gen0 = ep.Client(0);
  REQUIRE(gen0->Set("nccl_id", "old").ok());
  CHECK(*gen0->NumKeys() == 1);
  BeginGeneration(ep, 1);
  auto gen1 = ep.Client(1);
  CHECK(gen1->Get("nccl_id", milliseconds(0)).status().code() == StatusCode::kDeadlineExceeded);
  REQUIRE(gen1->Set("nccl_id", "new").ok());
  CHECK(*gen1->Get("nccl_id", milliseconds(0)) == "new");
  CHECK(*gen1->NumKeys() == 1);
  CHECK(ep.OnIo([&] { return ep.store().DeleteGenerationsBefore(1); }) == 1);
  CHECK(ep.OnIo([&] { return ep.store().store().NumKeys(""); }) == 1);
  CHECK(*gen1->Get("nccl_id", milliseconds(0)) == "new");
}

TEST_CASE("DeleteGenerationsBefore removes the keys of every earlier generation and nothing else") {
  TestEndpoint ep;
  const std::vector<std::string> keys = {"gen/0/a", "gen/1/b",  "gen/9/c", "gen/10/d", "gen/11/e",
                                         "gen/x/f", "gen/-1/g", "gen/3",   "other/h"};
  for (const auto& k : keys) REQUIRE(ep.OnIo([&] { return ep.store().Set(k, "v"); }).ok());
  CHECK(ep.OnIo([&] { return ep.store().DeleteGenerationsBefore(10); }) == 3);
  std::vector<std::string> left = ep.OnIo([&] {
    std::vector<std::string> out;
    for (const auto& k : keys) {
      if (ep.store().store().Get(k) != nullptr) out.push_back(k);
    }
    return out;
  });
  CHECK(left == std::vector<std::string>{"gen/10/d", "gen/11/e", "gen/x/f", "gen/-1/g", "gen/3",
                                         "other/h"});
}

TEST_CASE("BeginGeneration closes an earlier generation's blocked get and wait promptly") {
  TestEndpoint ep;
  BeginGeneration(ep, 1);
  auto getter = ep.Client(1);
  auto waiter = ep.Client(1);
  REQUIRE(getter->Set("present", "1").ok());
  auto got = std::async(std::launch::async, [&] { return getter->Get("never", seconds(60)); });
  auto waited = std::async(std::launch::async, [&] {
    return waiter->Wait({"present", "absent"}, seconds(60));
  });
  REQUIRE(WaitUntilParked(ep, 2));
  BeginGeneration(ep, 2);
  // Both calls would block for 60 s; the close answers them at once.
  REQUIRE(got.wait_for(kParkTimeout) == std::future_status::ready);
  REQUIRE(waited.wait_for(kParkTimeout) == std::future_status::ready);
  CHECK(got.get().status().code() == StatusCode::kUnavailable);
  CHECK(waited.get().code() == StatusCode::kUnavailable);
  // The closed connections' waiters are gone, and so are their generation's keys once dropped.
  CHECK(WaitUntilParked(ep, 0));
  CHECK(ep.OnIo([&] { return ep.store().DeleteGenerationsBefore(2); }) == 1);
  CHECK(ep.OnIo([&] { return ep.store().store().NumKeys(""); }) == 0);
  // The next call reconnects and learns that its generation is over.
  Status again = getter->Set("late", "x");
  CHECK(again.code() == StatusCode::kAborted);
  CHECK(
      again.message().find("generation 1 of job 'test-job' is over (the job is at generation 2)") !=
      std::string::npos);
  CHECK(ep.OnIo([&] { return ep.store().store().NumKeys(""); }) == 0);
  CHECK(ep.Client(2)->Set("fresh", "1").ok());
  CHECK(ep.Stop());
  CHECK(ep.LogContains("generation 2 began: closed 2 store connection(s) of earlier generations"));
}

// One request on a raw store connection (frames built by hand, no StoreClient prefixing);
// returns the reply frame.
wire::Frame RawCall(int fd, wire::FrameDecoder& decoder, const StoreRequest& r) {
  REQUIRE(SendFrame(fd, r.type, EncodeStoreRequest(r)).ok());
  auto reply = ReceiveFrame(fd, decoder, Clock::now() + kParkTimeout);
  REQUIRE_MESSAGE(reply.ok(), reply.status().ToString());
  return std::move(reply).value();
}

TEST_CASE("A connection cannot name another generation's keys, even in frames built by hand") {
  TestEndpoint ep;
  BeginGeneration(ep, 2);
  REQUIRE(ep.OnIo([&] { return ep.store().Set("gen/1/x", "old"); }).ok());
  REQUIRE(ep.OnIo([&] { return ep.store().Set("gen/22/x", "other"); }).ok());
  auto fd = ConnectToEndpoint(ep.address(), kTestJobId, kTestSecret, PeerRole::kStoreClient, 2,
                              Clock::now() + kParkTimeout);
  REQUIRE_MESSAGE(fd.ok(), fd.status().ToString());
  wire::FrameDecoder decoder;
  auto request = [](uint8_t type, std::string key) {
    StoreRequest r;
    r.type = type;
    r.key = std::move(key);
    return r;
  };
  std::vector<StoreRequest> refused;
  for (std::string key : {"gen/1/x", "gen/22/x", "x", "gen/2"}) {
    refused.push_back(request(msg::kStoreGet, key));
    StoreRequest set = request(msg::kStoreSet, key);
    set.value = "poison";
    refused.push_back(set);
    StoreRequest add = request(msg::kStoreAdd, key);
    add.delta = 1;
    refused.push_back(add);
    StoreRequest cas = request(msg::kStoreCompareSet, key);
    cas.value = "old";
    cas.desired = "poison";
    refused.push_back(cas);
    refused.push_back(request(msg::kStoreDelete, key));
    StoreRequest wait = request(msg::kStoreWait, "");
    wait.keys = {"gen/2/ok", key};
    wait.timeout = milliseconds(60000);
    refused.push_back(wait);
    StoreRequest check = request(msg::kStoreCheck, "");
    check.keys = {key};
    refused.push_back(check);
  }
  refused.push_back(request(msg::kStoreNumKeys, "gen/1/"));
  refused.push_back(request(msg::kStoreNumKeys, ""));
  for (const StoreRequest& r : refused) {
    CAPTURE(StoreOpName(r.type));
    CAPTURE(r.key);
    wire::Frame reply = RawCall(fd->get(), decoder, r);
    REQUIRE(reply.type == msg::kStoreError);
    Status st = DecodeStoreError(reply.payload);
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK(st.message().find("is outside generation 2 of this connection (its keys start with "
                            "'gen/2/')") != std::string::npos);
  }
  // Nothing was read, written or parked, and the connection still serves its own generation.
  CHECK(ep.OnIo([&] { return *ep.store().store().Get("gen/1/x"); }) == "old");
  CHECK(ep.OnIo([&] { return *ep.store().store().Get("gen/22/x"); }) == "other");
  CHECK(ep.OnIo([&] { return ep.store().store().NumKeys(""); }) == 2);
  CHECK(ep.OnIo([&] { return ep.store().store().num_waiters(); }) == 0);
  StoreRequest own = request(msg::kStoreSet, "gen/2/x");
  own.value = "mine";
  CHECK(RawCall(fd->get(), decoder, own).type == msg::kStoreOk);
  wire::Frame count = RawCall(fd->get(), decoder, request(msg::kStoreNumKeys, "gen/2/"));
  REQUIRE(count.type == msg::kStoreOk);
  CHECK(count.payload == wire::ByteWriter().I64(1).Take());
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
  BeginGeneration(ep, 2);
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
