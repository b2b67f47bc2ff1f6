// Proc tests of the launcher's side of the store proxy (docs/protocol.md, "Store proxy"): a real
// Endpoint + StoreService on 127.0.0.1 and a connection of role kStoreProxy sending PROXIED frames
// by hand, as an agent (or helper C's simulator) does.
#include <doctest/doctest.h>

#include <thread>

#include "common/endpoint/endpoint_client.h"
#include "common/message_types.h"
#include "common/store/proxy_protocol.h"
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

struct ProxyConnection {
  UniqueFd fd;
  wire::FrameDecoder decoder;

  Status Send(uint64_t tag, const StoreRequest& r) {
    return SendFrame(fd.get(), msg::kStoreProxied, EncodeProxiedRequest(tag, r));
  }
  Result<ProxiedReply> Receive(milliseconds within = milliseconds(10000)) {
    DSLAUNCH_ASSIGN_OR_RETURN(wire::Frame f, ReceiveFrame(fd.get(), decoder, Clock::now() + within));
    if (f.type != msg::kStoreProxiedReply) return InternalError("type " + std::to_string(f.type));
    return DecodeProxiedReply(f.payload);
  }
};

ProxyConnection ConnectProxy(const TestEndpoint& ep, int generation) {
  auto fd = ConnectToEndpoint(ep.address(), kTestJobId, kTestSecret, PeerRole::kStoreProxy,
                              generation, Clock::now() + seconds(10));
  REQUIRE_MESSAGE(fd.ok(), fd.status().ToString());
  return ProxyConnection{std::move(*fd), {}};
}

StoreRequest Req(uint8_t type, std::string key) {
  StoreRequest r;
  r.type = type;
  r.key = std::move(key);
  return r;
}

TEST_CASE("A proxy connection's parked GET does not hold up the requests behind it") {
  TestEndpoint ep;
  ProxyConnection p = ConnectProxy(ep, 0);
  StoreRequest get = Req(msg::kStoreGet, "gen/0/k");
  get.timeout = milliseconds(10000);
  REQUIRE(p.Send(1, get).ok());
  StoreRequest add = Req(msg::kStoreAdd, "gen/0/n");
  add.delta = 5;
  REQUIRE(p.Send(2, add).ok());
  StoreRequest set = Req(msg::kStoreSet, "gen/0/k");
  set.value = "v";
  REQUIRE(p.Send(3, set).ok());
  // The ADD (tag 2) is answered while the GET (tag 1) is parked; the SET wakes the GET.
  auto first = p.Receive();
  REQUIRE(first.ok());
  CHECK(first->tag == 2);
  wire::ByteReader in(first->payload);
  int64_t v = 0;
  CHECK((in.I64(v) && v == 5));
  std::map<uint64_t, ProxiedReply> rest;
  for (int i = 0; i < 2; ++i) {
    auto r = p.Receive();
    REQUIRE(r.ok());
    rest[r->tag] = *r;
  }
  REQUIRE(rest.count(1) == 1);
  CHECK(rest[1].type == msg::kStoreOk);
  CHECK(rest[1].payload == wire::ByteWriter().String("v").Take());
  CHECK(rest[3].type == msg::kStoreOk);
  CHECK(ep.Stop());
}

TEST_CASE("A proxy connection of generation g cannot name another generation's keys") {
  TestEndpoint ep;
  ep.OnIo([&] {
    ep.endpoint().BeginGeneration(1);
    return 0;
  });
  ProxyConnection p = ConnectProxy(ep, 1);
  REQUIRE(p.Send(7, Req(msg::kStoreSet, "gen/2/x")).ok());
  auto r = p.Receive();
  REQUIRE(r.ok());
  CHECK(r->tag == 7);
  REQUIRE(r->type == msg::kStoreError);
  Status st = DecodeStoreError(r->payload);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() ==
        "set key 'gen/2/x' is outside generation 1 of this connection (its keys start with 'gen/1/')");
  CHECK(ep.OnIo([&] { return ep.store().store().Get("gen/2/x") == nullptr; }));
}

TEST_CASE("The endpoint fences proxy connections by generation like store clients") {
  TestEndpoint ep;
  ProxyConnection p = ConnectProxy(ep, 0);
  StoreRequest wait;
  wait.type = msg::kStoreWait;
  wait.keys = {"gen/0/never"};
  wait.timeout = milliseconds(60000);
  REQUIRE(p.Send(1, wait).ok());
  std::this_thread::sleep_for(milliseconds(50));
  ep.OnIo([&] {
    ep.endpoint().BeginGeneration(1);
    return 0;
  });
  // The parked WAIT's connection is closed at once, not answered.
  auto closed = p.Receive(milliseconds(5000));
  CHECK(closed.status().code() == StatusCode::kUnavailable);
  auto stale = ConnectToEndpoint(ep.address(), kTestJobId, kTestSecret, PeerRole::kStoreProxy, 0,
                                 Clock::now() + seconds(5));
  CHECK(stale.status().code() == StatusCode::kAborted);
  auto future = ConnectToEndpoint(ep.address(), kTestJobId, kTestSecret, PeerRole::kStoreProxy, 2,
                                  Clock::now() + seconds(5));
  CHECK(future.status().code() == StatusCode::kFailedPrecondition);
  CHECK(ep.OnIo([&] { return ep.store().store().num_waiters(); }) == 0);
}

TEST_CASE("A reused outstanding tag or a malformed PROXIED closes the proxy connection") {
  TestEndpoint ep;
  ProxyConnection p = ConnectProxy(ep, 0);
  StoreRequest get = Req(msg::kStoreGet, "gen/0/k");
  get.timeout = milliseconds(10000);
  REQUIRE(p.Send(1, get).ok());
  REQUIRE(p.Send(1, get).ok());
  CHECK(p.Receive(milliseconds(5000)).status().code() == StatusCode::kUnavailable);
  ProxyConnection q = ConnectProxy(ep, 0);
  REQUIRE(SendFrame(q.fd.get(), msg::kStoreProxied, "short").ok());
  CHECK(q.Receive(milliseconds(5000)).status().code() == StatusCode::kUnavailable);
  CHECK(ep.LogContains("store-proxy"));
}

}  // namespace
}  // namespace dslaunch
