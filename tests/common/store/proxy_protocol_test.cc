#include "common/store/proxy_protocol.h"

#include <doctest/doctest.h>

#include "common/message_types.h"
#include "common/wire.h"

namespace dslaunch {
namespace {

TEST_CASE("A proxied request carries its tag, op and the op's usual payload") {
  StoreRequest r;
  r.type = msg::kStoreAdd;
  r.key = "gen/3/barrier/x/arrived";
  r.delta = 5;
  std::string payload = EncodeProxiedRequest(0x0102030405060708ull, r);
  // The layout of docs/protocol.md, "Store proxy": u64 tag, u8 op, then the ADD payload.
  std::string expected = wire::ByteWriter().U64(0x0102030405060708ull).U8(msg::kStoreAdd).Take() +
                         EncodeStoreRequest(r);
  CHECK(payload == expected);
  auto back = DecodeProxiedRequest(payload);
  REQUIRE(back.ok());
  CHECK(back->tag == 0x0102030405060708ull);
  CHECK(back->request.type == msg::kStoreAdd);
  CHECK(back->request.key == r.key);
  CHECK(back->request.delta == 5);
}

TEST_CASE("Every store op survives a proxied round trip") {
  StoreRequest r;
  r.key = "gen/0/k";
  r.value = "v";
  r.desired = "d";
  r.keys = {"gen/0/a", "gen/0/b"};
  r.timeout = std::chrono::milliseconds(250);
  for (uint8_t op : {msg::kStoreSet, msg::kStoreGet, msg::kStoreAdd, msg::kStoreCompareSet,
                     msg::kStoreWait, msg::kStoreCheck, msg::kStoreDelete, msg::kStoreNumKeys}) {
    CAPTURE(StoreOpName(op));
    r.type = op;
    auto back = DecodeProxiedRequest(EncodeProxiedRequest(op, r));
    REQUIRE(back.ok());
    CHECK(back->tag == op);
    CHECK(back->request.type == op);
  }
}

TEST_CASE("DecodeProxiedRequest rejects short headers, non-store ops and malformed inner requests") {
  StoreRequest r;
  r.type = msg::kStoreDelete;
  r.key = "gen/0/k";
  std::string good = EncodeProxiedRequest(7, r);
  CHECK(DecodeProxiedRequest(good.substr(0, 8)).status().code() == StatusCode::kInvalidArgument);
  CHECK(DecodeProxiedRequest(good + "x").status().code() == StatusCode::kInvalidArgument);
  std::string nested = good;
  nested[8] = static_cast<char>(msg::kStoreProxied);
  CHECK(DecodeProxiedRequest(nested).status().code() == StatusCode::kInvalidArgument);
  std::string auth = good;
  auth[8] = static_cast<char>(msg::kAuth);
  CHECK(DecodeProxiedRequest(auth).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("A proxied reply carries its tag, the response type and its payload") {
  std::string ok = EncodeProxiedReply(42, msg::kStoreOk, wire::ByteWriter().I64(8).Take());
  auto back = DecodeProxiedReply(ok);
  REQUIRE(back.ok());
  CHECK(back->tag == 42);
  CHECK(back->type == msg::kStoreOk);
  wire::ByteReader in(back->payload);
  int64_t v = 0;
  CHECK(in.I64(v));
  CHECK(v == 8);

  Status err = DeadlineExceededError("key not set within 5 ms");
  auto e = DecodeProxiedReply(EncodeProxiedReply(43, msg::kStoreError, EncodeStoreError(err)));
  REQUIRE(e.ok());
  CHECK(e->type == msg::kStoreError);
  Status decoded = DecodeStoreError(e->payload);
  CHECK(decoded.code() == err.code());
  CHECK(decoded.message() == err.message());
}

TEST_CASE("DecodeProxiedReply rejects short headers and other response types") {
  std::string ok = EncodeProxiedReply(1, msg::kStoreOk, "");
  CHECK(DecodeProxiedReply(ok.substr(0, 8)).status().code() == StatusCode::kInvalidArgument);
  std::string other = ok;
  other[8] = static_cast<char>(msg::kStoreProxiedReply);
  CHECK(DecodeProxiedReply(other).status().code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dslaunch
