// Proc tests of the launcher's side of the store proxy (docs/protocol.md, "Store proxy"): a real
// Endpoint + StoreService on 127.0.0.1 whose agent connections route PROXIED frames as the job
// runner's do (tests/support/proxy_launcher.h), and an agent's control connection (role 2) that
// sends PROXIED and control frames by hand, as an agent (or a simulated one) does.
#include <doctest/doctest.h>

#include <map>
#include <thread>

#include "common/endpoint/endpoint_client.h"
#include "common/store/proxy_protocol.h"
#include "common/store/store_protocol.h"
#include "tests/support/proxy_launcher.h"
#include "tests/support/subprocess.h"

namespace dslaunch::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

// The agent's end of its control connection.
struct AgentConnection {
  UniqueFd fd;
  wire::FrameDecoder decoder;

  Status Send(uint64_t tag, const StoreRequest& r) {
    return SendFrame(fd.get(), msg::kStoreProxied, EncodeProxiedRequest(tag, r));
  }
  Status SendControl(const control::Message& m) {
    wire::Frame f = control::Encode(m);
    return SendFrame(fd.get(), f.type, f.payload);
  }
  // The next PROXIED_REPLY; control messages before it (the ASSIGNMENTs) are skipped.
  Result<ProxiedReply> Receive(milliseconds within = milliseconds(10000)) {
    for (;;) {
      DSLAUNCH_ASSIGN_OR_RETURN(wire::Frame f, ReceiveFrame(fd.get(), decoder, Clock::now() + within));
      if (f.type >= msg::kFirstAgentMessage) continue;
      if (f.type != msg::kStoreProxiedReply) return InternalError("type " + std::to_string(f.type));
      return DecodeProxiedReply(f.payload);
    }
  }
};

AgentConnection ConnectAgent(ProxyLauncher& launcher) {
  auto fd = ConnectToEndpoint(launcher.ep().address(), kTestJobId, kTestSecret, PeerRole::kAgent, 0,
                              Clock::now() + seconds(10));
  REQUIRE_MESSAGE(fd.ok(), fd.status().ToString());
  return AgentConnection{std::move(*fd), {}};
}

StoreRequest Req(uint8_t type, std::string key) {
  StoreRequest r;
  r.type = type;
  r.key = std::move(key);
  return r;
}

StoreRequest Wait(std::string key) {
  StoreRequest r;
  r.type = msg::kStoreWait;
  r.keys = {std::move(key)};
  r.timeout = milliseconds(60000);
  return r;
}

Status ErrorOf(const ProxiedReply& r) {
  if (r.type != msg::kStoreError) return Status::Ok();
  return DecodeStoreError(r.payload);
}

TEST_CASE("A proxy session's parked GET does not hold up the requests behind it") {
  ProxyLauncher launcher;
  AgentConnection a = ConnectAgent(launcher);
  launcher.Assign(0);
  StoreRequest get = Req(msg::kStoreGet, "gen/0/k");
  get.timeout = milliseconds(10000);
  REQUIRE(a.Send(1, get).ok());
  StoreRequest add = Req(msg::kStoreAdd, "gen/0/n");
  add.delta = 5;
  REQUIRE(a.Send(2, add).ok());
  StoreRequest set = Req(msg::kStoreSet, "gen/0/k");
  set.value = "v";
  REQUIRE(a.Send(3, set).ok());
  // The ADD (tag 2) is answered while the GET (tag 1) is parked; the SET wakes the GET.
  auto first = a.Receive();
  REQUIRE(first.ok());
  CHECK(first->tag == 2);
  wire::ByteReader in(first->payload);
  int64_t v = 0;
  CHECK((in.I64(v) && v == 5));
  std::map<uint64_t, ProxiedReply> rest;
  for (int i = 0; i < 2; ++i) {
    auto r = a.Receive();
    REQUIRE(r.ok());
    rest[r->tag] = *r;
  }
  REQUIRE(rest.count(1) == 1);
  CHECK(rest[1].type == msg::kStoreOk);
  CHECK(rest[1].payload == wire::ByteWriter().String("v").Take());
  CHECK(rest[3].type == msg::kStoreOk);
  CHECK(launcher.ep().Stop());
}

TEST_CASE("A PROXIED before the agent's first ASSIGNMENT is answered kAborted") {
  ProxyLauncher launcher;
  AgentConnection a = ConnectAgent(launcher);
  REQUIRE(a.Send(4, Req(msg::kStoreSet, "gen/0/x")).ok());
  auto r = a.Receive();
  REQUIRE(r.ok());
  CHECK(r->tag == 4);
  Status st = ErrorOf(*r);
  CHECK(st.code() == StatusCode::kAborted);
  CHECK(st.message() == "no assignment yet");
  CHECK(launcher.ep().OnIo([&] { return launcher.ep().store().store().Get("gen/0/x") == nullptr; }));
}

TEST_CASE("A proxy session of generation g cannot name another generation's keys") {
  ProxyLauncher launcher;
  AgentConnection a = ConnectAgent(launcher);
  launcher.Assign(1);
  REQUIRE(a.Send(7, Req(msg::kStoreSet, "gen/2/x")).ok());
  auto r = a.Receive();
  REQUIRE(r.ok());
  CHECK(r->tag == 7);
  Status st = ErrorOf(*r);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() ==
        "set key 'gen/2/x' is outside generation 1 of this connection (its keys start with 'gen/1/')");
  CHECK(launcher.ep().OnIo([&] { return launcher.ep().store().store().Get("gen/2/x") == nullptr; }));
}

TEST_CASE("After the agent's AGENT_DONE a PROXIED is answered kAborted and the parked WAIT is dropped") {
  ProxyLauncher launcher;
  AgentConnection a = ConnectAgent(launcher);
  launcher.Assign(0);
  REQUIRE(a.Send(1, Wait("gen/0/never")).ok());
  REQUIRE(WaitFor([&] { return launcher.waiters() == 1; }, seconds(10)));
  // Another generation's AGENT_DONE ends nothing.
  REQUIRE(a.SendControl(control::AgentDone{5}).ok());
  REQUIRE(a.Send(2, Req(msg::kStoreSet, "gen/0/a")).ok());
  auto set = a.Receive();
  REQUIRE(set.ok());
  CHECK(set->tag == 2);
  CHECK(set->type == msg::kStoreOk);
  REQUIRE(a.SendControl(control::AgentDone{0}).ok());
  REQUIRE(a.Send(3, Req(msg::kStoreSet, "gen/0/b")).ok());
  // The WAIT (tag 1) is never answered: the first reply is the refusal of tag 3.
  auto late = a.Receive();
  REQUIRE(late.ok());
  CHECK(late->tag == 3);
  Status st = ErrorOf(*late);
  CHECK(st.code() == StatusCode::kAborted);
  CHECK(st.message() == "generation 0 of job 'test-job' is over");
  CHECK(launcher.waiters() == 0);
  CHECK(launcher.ep().OnIo([&] { return launcher.ep().store().store().Get("gen/0/b") == nullptr; }));
}

TEST_CASE("A new generation drops the old one's parked requests; its keys work and the old ones do not") {
  ProxyLauncher launcher;
  AgentConnection a = ConnectAgent(launcher);
  launcher.Assign(0);
  REQUIRE(a.Send(1, Wait("gen/0/never")).ok());
  REQUIRE(WaitFor([&] { return launcher.waiters() == 1; }, seconds(10)));
  launcher.EndProxy();  // the job begins generation 1
  CHECK(launcher.waiters() == 0);
  REQUIRE(a.Send(2, Req(msg::kStoreGet, "gen/0/k")).ok());
  auto over = a.Receive();
  REQUIRE(over.ok());
  CHECK(over->tag == 2);
  CHECK(ErrorOf(*over).message() == "generation 0 of job 'test-job' is over");
  launcher.Assign(1);
  StoreRequest set = Req(msg::kStoreSet, "gen/1/x");
  set.value = "new";
  REQUIRE(a.Send(3, set).ok());
  REQUIRE(a.Send(4, Req(msg::kStoreSet, "gen/0/x")).ok());
  auto ok = a.Receive();
  auto old = a.Receive();
  REQUIRE((ok.ok() && old.ok()));
  CHECK(ok->tag == 3);
  CHECK(ok->type == msg::kStoreOk);
  CHECK(old->tag == 4);
  CHECK(ErrorOf(*old).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("A reused outstanding tag or a malformed PROXIED closes the agent's connection") {
  ProxyLauncher launcher;
  AgentConnection a = ConnectAgent(launcher);
  launcher.Assign(0);
  StoreRequest get = Req(msg::kStoreGet, "gen/0/k");
  get.timeout = milliseconds(10000);
  REQUIRE(a.Send(1, get).ok());
  REQUIRE(a.Send(1, get).ok());
  CHECK(a.Receive(milliseconds(5000)).status().code() == StatusCode::kUnavailable);
  REQUIRE(WaitFor([&] { return launcher.waiters() == 0; }, seconds(10)));  // dropped with the connection
  AgentConnection b = ConnectAgent(launcher);
  REQUIRE(SendFrame(b.fd.get(), msg::kStoreProxied, "short").ok());
  CHECK(b.Receive(milliseconds(5000)).status().code() == StatusCode::kUnavailable);
  CHECK(launcher.ep().LogContains("malformed proxied request"));
}

}  // namespace
}  // namespace dslaunch::testing
