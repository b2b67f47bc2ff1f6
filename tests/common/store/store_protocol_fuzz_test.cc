// Bounded randomized tests of everything a peer of the endpoint can make the launcher decode:
// the frame decoder (common/wire.h), the handshake (common/auth/handshake.h, reachable before
// authentication) and store requests and errors (common/store/store_protocol.h). Random and mutated
// inputs must give an error or a valid message that encodes back to the same bytes; never a
// crash, an exception, or an allocation out of proportion to the input. Seed and case count:
// tests/support/fuzz_cases.h.
#include <doctest/doctest.h>

#include <random>

#include "common/auth/handshake.h"
#include "common/auth/sha256.h"
#include "common/message_types.h"
#include "common/store/store_protocol.h"
#include "common/wire.h"
#include "tests/support/allocation_counter.h"
#include "tests/support/byte_mutator.h"
#include "tests/support/fuzz_cases.h"

namespace dslaunch {
namespace {

using testing::AllocationCounter;
using testing::FuzzCases;
using testing::FuzzSeed;
using testing::Mutate;
using testing::RandomBelow;
using testing::RandomBytes;

constexpr size_t kMaxAllocationPerInputByte = testing::kDecoderAllocationPerInputByte;
constexpr size_t kAllocationSlack = testing::kDecoderAllocationSlack;

void CheckAllocationBound(const AllocationCounter& counter, size_t input_bytes) {
  CAPTURE(input_bytes);
  CAPTURE(counter.largest());
  CHECK(counter.bytes() <= kMaxAllocationPerInputByte * input_bytes + kAllocationSlack);
}

const uint8_t kStoreTypes[] = {msg::kStoreSet,  msg::kStoreGet,   msg::kStoreAdd,
                               msg::kStoreCompareSet, msg::kStoreWait, msg::kStoreCheck,
                               msg::kStoreDelete, msg::kStoreNumKeys};

StoreRequest RandomStoreRequest(std::mt19937_64& rng) {
  StoreRequest r;
  r.type = kStoreTypes[RandomBelow(rng, std::size(kStoreTypes))];
  r.key = RandomBytes(rng, 24);
  r.value = RandomBytes(rng);
  r.desired = RandomBytes(rng, 24);
  r.delta = static_cast<int64_t>(rng());
  for (size_t i = RandomBelow(rng, 5); i > 0; --i) r.keys.push_back(RandomBytes(rng, 16));
  r.timeout = std::chrono::milliseconds(RandomBelow(rng, 100000));
  return r;
}

bool SameRequest(const StoreRequest& a, const StoreRequest& b) {
  return a.type == b.type && a.key == b.key && a.value == b.value && a.desired == b.desired &&
         a.delta == b.delta && a.keys == b.keys && a.timeout == b.timeout;
}

// The frames a stream holds, as the specification (docs/protocol.md, "Framing") reads them at
// once: the reference the incremental FrameDecoder is checked against.
struct ReferenceParse {
  std::vector<wire::Frame> frames;
  bool error = false;
  size_t rest = 0;  // bytes after the last whole frame (when no error)
};

ReferenceParse ParseStream(const std::string& s) {
  ReferenceParse out;
  size_t pos = 0;
  while (s.size() - pos >= wire::kFrameHeaderBytes) {
    const auto* u = reinterpret_cast<const unsigned char*>(s.data() + pos);
    uint32_t len = (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | u[3];
    if (len == 0 || len > wire::kMaxFrameBytes) {
      out.error = true;
      return out;
    }
    if (s.size() - pos - wire::kFrameHeaderBytes < len) break;
    out.frames.push_back(wire::Frame{static_cast<uint8_t>(s[pos + 4]), s.substr(pos + 5, len - 1)});
    pos += wire::kFrameHeaderBytes + len;
  }
  out.rest = s.size() - pos;
  return out;
}

TEST_CASE("FrameDecoder fed random and mutated streams in random pieces agrees with the reference") {
  const uint64_t seed = FuzzSeed();
  const int cases = FuzzCases(3000);
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < cases; ++i) {
    CAPTURE(i);
    std::string stream;
    for (size_t n = RandomBelow(rng, 6); n > 0; --n) {
      wire::AppendFrame(static_cast<uint8_t>(rng()), RandomBytes(rng), stream);
    }
    switch (RandomBelow(rng, 3)) {
      case 0: break;                                  // valid frames only
      case 1: stream = Mutate(stream, rng); break;    // damaged frames
      case 2: stream = RandomBytes(rng, 64); break;   // noise
    }
    const ReferenceParse want = ParseStream(stream);

    wire::FrameDecoder decoder;
    std::vector<wire::Frame> got;
    bool error = false;
    size_t fed = 0;
    while (fed < stream.size() && !error) {
      size_t piece = std::min(stream.size() - fed, 1 + RandomBelow(rng, 40));
      decoder.Feed(stream.data() + fed, piece);
      fed += piece;
      for (;;) {
        auto next = decoder.Next();
        if (!next.ok()) {
          CHECK(next.status().code() == StatusCode::kInvalidArgument);
          error = true;
          break;
        }
        if (!next->has_value()) break;
        got.push_back(std::move(**next));
      }
    }
    CHECK(error == want.error);
    REQUIRE(got.size() == want.frames.size());
    for (size_t k = 0; k < got.size(); ++k) {
      CHECK(got[k].type == want.frames[k].type);
      CHECK(got[k].payload == want.frames[k].payload);
    }
    if (!error) CHECK(decoder.buffered() == want.rest);
  }
}

TEST_CASE("Random and mutated store requests decode to an error or to a request that encodes back") {
  const uint64_t seed = FuzzSeed();
  const int cases = FuzzCases(5000);
  CAPTURE(seed);
  std::mt19937_64 rng(seed + 1);
  int decoded = 0;
  for (int i = 0; i < cases; ++i) {
    CAPTURE(i);
    StoreRequest original = RandomStoreRequest(rng);
    wire::Frame frame{original.type, EncodeStoreRequest(original)};
    switch (RandomBelow(rng, 4)) {
      case 0: break;
      case 1:
      case 2: frame.payload = Mutate(frame.payload, rng); break;
      case 3:
        frame.type = static_cast<uint8_t>(rng());
        frame.payload = RandomBytes(rng);
        break;
    }
    Result<StoreRequest> r = InternalError("not decoded");
    {
      AllocationCounter counter;
      r = DecodeStoreRequest(frame);
      CheckAllocationBound(counter, frame.payload.size());
    }
    if (!r.ok()) {
      CHECK(r.status().code() == StatusCode::kInvalidArgument);
      continue;
    }
    ++decoded;
    CHECK(r->timeout <= kMaxStoreWaitTimeout);
    std::string again = EncodeStoreRequest(*r);
    // Canonical: the same bytes, unless the timeout was clamped.
    if (r->timeout < kMaxStoreWaitTimeout) CHECK(again == frame.payload);
    auto twice = DecodeStoreRequest(wire::Frame{r->type, again});
    REQUIRE(twice.ok());
    CHECK(SameRequest(*twice, *r));
  }
  // The mix reaches the decoder's success path, not only its error paths.
  CHECK(decoded > cases / 4);
}

TEST_CASE("Store requests whose counts claim more elements than the frame holds are refused cheaply") {
  // A WAIT of 1 MiB whose key count says 2^32-1: the count must be checked against the bytes
  // present before anything is reserved.
  std::string payload = wire::ByteWriter().U32(0xffffffffu).Take() + std::string(1 << 20, '\0');
  AllocationCounter counter;
  auto r = DecodeStoreRequest(wire::Frame{msg::kStoreWait, payload});
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CheckAllocationBound(counter, payload.size());
}

TEST_CASE("A frame of empty keys decodes within the allocation bound") {
  // 2^18 empty keys and a timeout: the most elements a 1 MiB CHECK can hold.
  const uint32_t n = (1u << 20) / 4 - 1;
  wire::ByteWriter w;
  w.U32(n);
  for (uint32_t i = 0; i < n; ++i) w.U32(0);
  std::string payload = w.Take();
  AllocationCounter counter;
  auto r = DecodeStoreRequest(wire::Frame{msg::kStoreCheck, payload});
  REQUIRE(r.ok());
  CHECK(r->keys.size() == n);
  CheckAllocationBound(counter, payload.size());
}

TEST_CASE("Random and mutated store ERROR payloads decode to a status, never a crash") {
  const uint64_t seed = FuzzSeed();
  const int cases = FuzzCases(3000);
  CAPTURE(seed);
  std::mt19937_64 rng(seed + 2);
  for (int i = 0; i < cases; ++i) {
    CAPTURE(i);
    Status original(static_cast<StatusCode>(1 + RandomBelow(rng, 9)), RandomBytes(rng));
    std::string payload = EncodeStoreError(original);
    if (RandomBelow(rng, 3) != 0) payload = Mutate(payload, rng);
    AllocationCounter counter;
    Status st = DecodeStoreError(payload);
    CHECK_FALSE(st.ok());
    CheckAllocationBound(counter, payload.size());
  }
}

AuthRequest RandomAuth(std::mt19937_64& rng) {
  AuthRequest a;
  a.role = static_cast<PeerRole>(RandomBelow(rng, 4));
  a.job_id = RandomBytes(rng, 40);
  a.generation = static_cast<int32_t>(RandomBelow(rng, 1000));
  a.client_nonce = std::string(kNonceBytes, static_cast<char>(rng()));
  a.client_proof = std::string(kSha256DigestBytes, static_cast<char>(rng()));
  return a;
}

TEST_CASE("Random and mutated handshake messages decode to an error or a message that encodes back") {
  const uint64_t seed = FuzzSeed();
  const int cases = FuzzCases(3000);
  CAPTURE(seed);
  std::mt19937_64 rng(seed + 3);
  for (int i = 0; i < cases; ++i) {
    CAPTURE(i);
    const bool mutate = RandomBelow(rng, 4) != 0;
    // AUTH: what an anonymous peer sends, the one message decoded before authentication.
    std::string auth = EncodeAuth(RandomAuth(rng));
    if (mutate) auth = Mutate(auth, rng);
    {
      AllocationCounter counter;
      auto a = DecodeAuth(auth);
      CheckAllocationBound(counter, auth.size());
      if (a.ok() && a->version == kProtocolVersion) {
        CHECK(a->job_id.size() <= kMaxJobIdBytes);
        CHECK(EncodeAuth(*a) == auth);
      } else if (!a.ok()) {
        CHECK(a.status().code() == StatusCode::kInvalidArgument);
      }
    }
    // The server's messages, as a client decodes them.
    Challenge c;
    c.server_nonce = std::string(kNonceBytes, static_cast<char>(rng()));
    std::string challenge = EncodeChallenge(c);
    if (mutate) challenge = Mutate(challenge, rng);
    if (auto d = DecodeChallenge(challenge); d.ok()) {
      CHECK(d->magic == kHandshakeMagic);
      // A newer server may append fields: the known ones are a prefix of what arrived.
      CHECK(challenge.rfind(EncodeChallenge(*d), 0) == 0);
    }
    std::string rejected = EncodeAuthRejected(
        AuthRejection{static_cast<AuthRejectReason>(RandomBelow(rng, 6)), RandomBytes(rng)});
    if (mutate) rejected = Mutate(rejected, rng);
    if (auto d = DecodeAuthRejected(rejected); d.ok()) {
      CHECK(EncodeAuthRejected(*d) == rejected);
      CHECK_FALSE(RejectionToStatus(*d).ok());
    }
    std::string ok = RandomBytes(rng, 40);
    if (auto d = DecodeAuthOk(ok); d.ok()) CHECK(d->size() == kSha256DigestBytes);
  }
}

}  // namespace
}  // namespace dslaunch
