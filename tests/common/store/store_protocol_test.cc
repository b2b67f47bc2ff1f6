#include "common/store/store_protocol.h"

#include <doctest/doctest.h>

#include "common/endpoint/endpoint_client.h"
#include "common/message_types.h"

namespace dslaunch {
namespace {

using std::chrono::milliseconds;

wire::Frame ToFrame(const StoreRequest& r) { return wire::Frame{r.type, EncodeStoreRequest(r)}; }

TEST_CASE("Every store request survives encoding and decoding") {
  StoreRequest r;
  r.key = "gen/0/k";
  r.value = std::string("v\0v", 3);
  r.desired = "d";
  r.delta = -3;
  r.keys = {"a", "b"};
  r.timeout = milliseconds(1234);
  for (uint8_t type : {msg::kStoreSet, msg::kStoreGet, msg::kStoreAdd, msg::kStoreCompareSet,
                       msg::kStoreWait, msg::kStoreCheck, msg::kStoreDelete, msg::kStoreNumKeys}) {
    CAPTURE(StoreOpName(type));
    r.type = type;
    auto back = DecodeStoreRequest(ToFrame(r));
    REQUIRE(back.ok());
    CHECK(back->type == type);
    if (type != msg::kStoreWait && type != msg::kStoreCheck) CHECK(back->key == r.key);
    if (type == msg::kStoreSet || type == msg::kStoreCompareSet) CHECK(back->value == r.value);
    if (type == msg::kStoreCompareSet) CHECK(back->desired == "d");
    if (type == msg::kStoreAdd) CHECK(back->delta == -3);
    if (type == msg::kStoreWait || type == msg::kStoreCheck) CHECK(back->keys == r.keys);
    if (type == msg::kStoreGet || type == msg::kStoreWait)
      CHECK(back->timeout == milliseconds(1234));
  }
}

TEST_CASE("DecodeStoreRequest rejects unknown types, truncation and trailing bytes") {
  StoreRequest r;
  r.type = msg::kStoreSet;
  r.key = "k";
  r.value = "v";
  wire::Frame f = ToFrame(r);
  CHECK(DecodeStoreRequest(wire::Frame{msg::kStoreSet, f.payload + "x"}).status().code() ==
        StatusCode::kInvalidArgument);
  CHECK(DecodeStoreRequest(wire::Frame{msg::kStoreSet, f.payload.substr(0, 3)}).status().code() ==
        StatusCode::kInvalidArgument);
  CHECK(DecodeStoreRequest(wire::Frame{msg::kAuth, f.payload}).status().code() ==
        StatusCode::kInvalidArgument);
  CHECK(DecodeStoreRequest(wire::Frame{99, ""}).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("DecodeStoreRequest clamps a huge timeout") {
  wire::Frame f{msg::kStoreGet, wire::ByteWriter().String("k").U64(~uint64_t{0}).Take()};
  auto r = DecodeStoreRequest(f);
  REQUIRE(r.ok());
  CHECK(r->timeout == kMaxStoreWaitTimeout);
}

TEST_CASE("Store errors keep their code and message across the wire") {
  Status st = DecodeStoreError(EncodeStoreError(DeadlineExceededError("key not set within 5 ms")));
  CHECK(st.code() == StatusCode::kDeadlineExceeded);
  CHECK(st.message() == "key not set within 5 ms");
  CHECK(DecodeStoreError("").code() == StatusCode::kInternal);
  CHECK(DecodeStoreError(wire::ByteWriter().U8(200).String("x").Take()).code() ==
        StatusCode::kInternal);
}

TEST_CASE("ParseHostPort accepts IPv4, bracketed IPv6 and host names") {
  struct Case {
    const char* in;
    const char* host;
    uint16_t port;
  };
  const Case good[] = {{"127.0.0.1:29500", "127.0.0.1", 29500},
                       {"[::1]:1", "::1", 1},
                       {"node-3.cluster:65535", "node-3.cluster", 65535}};
  for (const Case& c : good) {
    CAPTURE(c.in);
    auto hp = ParseHostPort(c.in);
    REQUIRE(hp.ok());
    CHECK(hp->host == c.host);
    CHECK(hp->port == c.port);
  }
  for (const char* bad : {"", "host", "host:", ":80", "host:0", "host:65536", "host:8x", "::1:80",
                          "[::1]80", "[::1"}) {
    CAPTURE(bad);
    CHECK(ParseHostPort(bad).status().code() == StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace dslaunch
