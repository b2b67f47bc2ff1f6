#include "agent/store_proxy/request_combiner.h"

#include <doctest/doctest.h>

#include <map>

#include "common/message_types.h"
#include "common/wire.h"

namespace dslaunch::agent {
namespace {

using std::chrono::milliseconds;
using TimePoint = RequestCombiner::TimePoint;

const TimePoint kT0 = TimePoint() + std::chrono::hours(1);

StoreRequest Add(std::string key, int64_t delta) {
  StoreRequest r;
  r.type = msg::kStoreAdd;
  r.key = std::move(key);
  r.delta = delta;
  return r;
}

StoreRequest Get(std::string key, milliseconds timeout) {
  StoreRequest r;
  r.type = msg::kStoreGet;
  r.key = std::move(key);
  r.timeout = timeout;
  return r;
}

StoreRequest Wait(std::vector<std::string> keys, milliseconds timeout) {
  StoreRequest r;
  r.type = msg::kStoreWait;
  r.keys = std::move(keys);
  r.timeout = timeout;
  return r;
}

StoreRequest Set(std::string key) {
  StoreRequest r;
  r.type = msg::kStoreSet;
  r.key = std::move(key);
  r.value = "1";
  return r;
}

ProxiedReply OkI64(uint64_t tag, int64_t v) {
  return ProxiedReply{tag, msg::kStoreOk, wire::ByteWriter().I64(v).Take()};
}
ProxiedReply Ok(uint64_t tag, std::string payload = "") {
  return ProxiedReply{tag, msg::kStoreOk, std::move(payload)};
}
ProxiedReply Err(uint64_t tag, const Status& st) {
  return ProxiedReply{tag, msg::kStoreError, EncodeStoreError(st)};
}

int64_t I64Of(const LocalAnswer& a) {
  REQUIRE(a.type == msg::kStoreOk);
  wire::ByteReader in(a.payload);
  int64_t v = 0;
  REQUIRE(in.I64(v));
  return v;
}

std::map<LocalId, LocalAnswer> ById(std::vector<LocalAnswer> answers) {
  std::map<LocalId, LocalAnswer> out;
  for (auto& a : answers) {
    LocalId id = a.id;
    CHECK(out.emplace(id, std::move(a)).second);  // each request is answered once
  }
  return out;
}

TEST_CASE("ADDs of one key in one turn go upstream as one ADD; each gets its serial value") {
  RequestCombiner c;
  for (LocalId id = 1; id <= 8; ++id) c.Submit(id, Add("gen/0/b/arrived", 1), kT0);
  auto sends = c.TakeSends(kT0);
  REQUIRE(sends.size() == 1);
  CHECK(sends[0].request.type == msg::kStoreAdd);
  CHECK(sends[0].request.delta == 8);
  // Another node arrived first: the counter was 8, so this node's ADD of 8 gives 16.
  auto answers = c.OnReply(OkI64(sends[0].tag, 16), kT0);
  REQUIRE(answers.ok());
  auto by_id = ById(*answers);
  REQUIRE(by_id.size() == 8);
  for (LocalId id = 1; id <= 8; ++id) CHECK(I64Of(by_id.at(id)) == 8 + static_cast<int64_t>(id));
  CHECK(c.upstream_requests() == 1);
  CHECK(c.pending_members() == 0);
}

TEST_CASE("ADDs that arrive while one is in flight wait and go as the next one ADD") {
  RequestCombiner c;
  c.Submit(1, Add("gen/0/k", 2), kT0);
  c.Submit(2, Add("gen/0/k", 3), kT0);
  auto first = c.TakeSends(kT0);
  REQUIRE(first.size() == 1);
  c.Submit(3, Add("gen/0/k", 10), kT0);
  c.Submit(4, Add("gen/0/k", 20), kT0);
  CHECK(c.TakeSends(kT0).empty());  // never joined to, nor sent beside, the one in flight
  auto a = ById(*c.OnReply(OkI64(first[0].tag, 5), kT0));
  CHECK(I64Of(a.at(1)) == 2);
  CHECK(I64Of(a.at(2)) == 5);
  auto second = c.TakeSends(kT0);
  REQUIRE(second.size() == 1);
  CHECK(second[0].request.delta == 30);
  auto b = ById(*c.OnReply(OkI64(second[0].tag, 35), kT0));
  CHECK(I64Of(b.at(3)) == 15);
  CHECK(I64Of(b.at(4)) == 35);
  CHECK(c.upstream_requests() == 2);
}

TEST_CASE("A node's barrier of 8 ranks costs at most 2 ADDs and 2 WAITs upstream") {
  RequestCombiner c;
  const std::string arrived = "gen/0/barrier/b/arrived", done = "gen/0/barrier/b/done";
  // Five ranks arrive in one turn, three in the next while the ADD is in flight.
  for (LocalId id = 1; id <= 5; ++id) c.Submit(id, Add(arrived, 1), kT0);
  auto add1 = c.TakeSends(kT0);
  for (LocalId id = 6; id <= 8; ++id) c.Submit(id, Add(arrived, 1), kT0);
  REQUIRE(add1.size() == 1);
  auto first_arrivals = c.OnReply(OkI64(add1[0].tag, 5), kT0);
  REQUIRE(first_arrivals.ok());
  for (const auto& a : *first_arrivals) {
    c.Submit(100 + a.id, Wait({done}, milliseconds(60000)), kT0);  // each rank goes on to WAIT
  }
  auto sends = c.TakeSends(kT0);
  REQUIRE(sends.size() == 2);  // the second ADD and the first WAIT
  uint64_t add2 = sends[0].request.type == msg::kStoreAdd ? sends[0].tag : sends[1].tag;
  uint64_t wait1 = sends[0].request.type == msg::kStoreWait ? sends[0].tag : sends[1].tag;
  auto last = ById(*c.OnReply(OkI64(add2, 8), kT0));
  CHECK(I64Of(last.at(8)) == 8);  // rank 8 is the last arrival: it sets "done"
  for (LocalId id = 6; id <= 8; ++id) c.Submit(100 + id, Wait({done}, milliseconds(60000)), kT0);
  c.Submit(200, Set(done), kT0);
  sends = c.TakeSends(kT0);
  REQUIRE(sends.size() == 1);  // the SET: the waits of 6..8 wait behind WAIT 1
  CHECK(sends[0].request.type == msg::kStoreSet);
  CHECK(c.OnReply(Ok(sends[0].tag), kT0)->size() == 1);
  CHECK(c.OnReply(Ok(wait1), kT0)->size() == 5);
  sends = c.TakeSends(kT0);
  REQUIRE(sends.size() == 1);
  CHECK(c.OnReply(Ok(sends[0].tag), kT0)->size() == 3);
  // 2 ADDs + 2 WAITs + the SET, for 8 ranks' 8 ADDs and 8 WAITs.
  CHECK(c.upstream_requests() == 5);
  CHECK(c.pending_members() == 0);
}

TEST_CASE("A combined ADD that fails is sent again member by member") {
  RequestCombiner c;
  c.Submit(1, Add("gen/0/k", 1), kT0);
  c.Submit(2, Add("gen/0/k", 1), kT0);
  auto s = c.TakeSends(kT0);
  REQUIRE(s.size() == 1);
  auto none = c.OnReply(Err(s[0].tag, FailedPreconditionError("add overflows")), kT0);
  CHECK(none->empty());
  auto one = c.TakeSends(kT0);
  REQUIRE(one.size() == 1);
  CHECK(one[0].request.delta == 1);
  CHECK(I64Of(c.OnReply(OkI64(one[0].tag, 7), kT0)->at(0)) == 7);
  auto two = c.TakeSends(kT0);
  REQUIRE(two.size() == 1);
  auto e = c.OnReply(Err(two[0].tag, FailedPreconditionError("add overflows")), kT0);
  REQUIRE(e->size() == 1);
  CHECK(e->at(0).id == 2);
  CHECK(e->at(0).type == msg::kStoreError);
  CHECK(c.upstream_requests() == 3);
}

TEST_CASE("A delta that would overflow the batch's sum starts a new batch") {
  RequestCombiner c;
  c.Submit(1, Add("gen/0/k", INT64_MAX), kT0);
  c.Submit(2, Add("gen/0/k", 1), kT0);
  auto s = c.TakeSends(kT0);
  REQUIRE(s.size() == 1);
  CHECK(s[0].request.delta == INT64_MAX);
}

TEST_CASE("GETs combine with the shortest remaining timeout; the rest are sent again") {
  RequestCombiner c;
  c.Submit(1, Get("gen/0/k", milliseconds(0)), kT0);
  c.Submit(2, Get("gen/0/k", milliseconds(5000)), kT0);
  auto s = c.TakeSends(kT0);
  REQUIRE(s.size() == 1);
  CHECK(s[0].request.timeout == milliseconds(0));
  auto a = c.OnReply(Err(s[0].tag, DeadlineExceededError("key not set")), kT0);
  REQUIRE(a->size() == 1);
  CHECK(a->at(0).id == 1);
  CHECK(DecodeStoreError(a->at(0).payload).message() == "key not set");
  auto again = c.TakeSends(kT0 + milliseconds(3));
  REQUIRE(again.size() == 1);
  CHECK(again[0].request.timeout == milliseconds(4997));
  auto b = c.OnReply(Err(again[0].tag, DeadlineExceededError("key not set within 4997 ms")),
                     kT0 + milliseconds(5001));
  REQUIRE(b->size() == 1);
  // The server's text, restated for the request's own timeout, as the server would have said.
  CHECK(DecodeStoreError(b->at(0).payload).message() == "key not set within 5000 ms");
  CHECK(c.upstream_requests() == 2);
}

TEST_CASE("A GET's value is fanned out to every member of its batch") {
  RequestCombiner c;
  for (LocalId id = 1; id <= 4; ++id) c.Submit(id, Get("gen/0/k", milliseconds(100 * id)), kT0);
  auto s = c.TakeSends(kT0);
  REQUIRE(s.size() == 1);
  CHECK(s[0].request.timeout == milliseconds(100));
  auto a = c.OnReply(Ok(s[0].tag, wire::ByteWriter().String("v").Take()), kT0 + milliseconds(5));
  CHECK(a->size() == 4);
  for (const auto& x : *a) CHECK(x.type == msg::kStoreOk);
}

TEST_CASE("A member waiting behind an in-flight GET is sent at its deadline with timeout 0") {
  RequestCombiner c;
  c.Submit(1, Get("gen/0/k", milliseconds(60000)), kT0);
  auto s = c.TakeSends(kT0);
  REQUIRE(s.size() == 1);
  c.Submit(2, Get("gen/0/k", milliseconds(50)), kT0 + milliseconds(10));
  CHECK(c.TakeSends(kT0 + milliseconds(10)).empty());
  REQUIRE(c.NextDeadline().has_value());
  CHECK(*c.NextDeadline() == kT0 + milliseconds(60));
  auto due = c.TakeSends(kT0 + milliseconds(60));
  REQUIRE(due.size() == 1);
  CHECK(due[0].request.timeout == milliseconds(0));
  CHECK(c.in_flight() == 2);
  auto a = c.OnReply(Err(due[0].tag, DeadlineExceededError("key not set")), kT0 + milliseconds(61));
  REQUIRE(a->size() == 1);
  CHECK(a->at(0).id == 2);
  CHECK(DecodeStoreError(a->at(0).payload).message() == "key not set within 50 ms");
}

TEST_CASE("A request never joins one already sent: its answer could predate it") {
  RequestCombiner c;
  c.Submit(1, Wait({"gen/0/a", "gen/0/b"}, milliseconds(1000)), kT0);
  auto s = c.TakeSends(kT0);
  c.Submit(2, Wait({"gen/0/a", "gen/0/b"}, milliseconds(1000)), kT0);
  c.Submit(3, Wait({"gen/0/b", "gen/0/a"}, milliseconds(1000)), kT0);  // another key list
  auto other = c.TakeSends(kT0);
  REQUIRE(other.size() == 1);  // only the other list's
  auto a = c.OnReply(Ok(s[0].tag), kT0);
  REQUIRE(a->size() == 1);
  CHECK(a->at(0).id == 1);
  auto next = c.TakeSends(kT0);
  REQUIRE(next.size() == 1);
  CHECK(c.OnReply(Ok(next[0].tag), kT0)->at(0).id == 2);
}

TEST_CASE("SET, COMPARE_SET, DELETE, CHECK and NUM_KEYS pass through one to one") {
  RequestCombiner c;
  for (uint8_t op : {msg::kStoreSet, msg::kStoreCompareSet, msg::kStoreDelete, msg::kStoreCheck,
                     msg::kStoreNumKeys}) {
    StoreRequest r;
    r.type = op;
    r.key = "gen/0/k";
    c.Submit(op, r, kT0);
    c.Submit(op + 100, r, kT0);
  }
  auto s = c.TakeSends(kT0);
  CHECK(s.size() == 10);
  for (const auto& u : s) CHECK(c.OnReply(Ok(u.tag), kT0)->size() == 1);
  CHECK(c.pending_members() == 0);
}

TEST_CASE("An unknown tag is an error; FailAll answers every request once") {
  RequestCombiner c;
  CHECK(c.OnReply(Ok(99), kT0).status().code() == StatusCode::kInvalidArgument);
  c.Submit(1, Add("gen/0/k", 1), kT0);
  c.TakeSends(kT0);
  c.Submit(2, Add("gen/0/k", 1), kT0);
  c.Submit(3, Set("gen/0/x"), kT0);
  auto failed = ById(c.FailAll(UnavailableError("upstream lost")));
  CHECK(failed.size() == 3);
  for (const auto& [id, a] : failed) CHECK(DecodeStoreError(a.payload).code() == StatusCode::kUnavailable);
  CHECK(c.pending_members() == 0);
  CHECK(c.in_flight() == 0);
}

TEST_CASE("RestateTimeout names the request's own timeout") {
  CHECK(RestateTimeout("key not set within 12 ms", milliseconds(30)) == "key not set within 30 ms");
  CHECK(RestateTimeout("keys 'a', 'b' not set", milliseconds(30)) ==
        "keys 'a', 'b' not set within 30 ms");
  CHECK(RestateTimeout("key not set within 12 ms", milliseconds(0)) == "key not set");
}

}  // namespace
}  // namespace dslaunch::agent
