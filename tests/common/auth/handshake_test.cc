#include "common/auth/handshake.h"

#include <doctest/doctest.h>

#include "common/wire.h"

namespace dslaunch {
namespace {

constexpr std::string_view kSecret = "0123456789abcdef0123456789abcdef";

Challenge MakeChallenge() {
  Challenge c;
  c.server_nonce = std::string(kNonceBytes, 's');
  return c;
}

AuthRequest Answer(const Challenge& c, std::string_view secret = kSecret,
                   std::string_view job = "job-1", PeerRole role = PeerRole::kStoreClient,
                   int generation = 0) {
  auto a = AnswerChallenge(c, secret, role, job, generation, std::string(kNonceBytes, 'c'));
  REQUIRE(a.ok());
  return *a;
}

TEST_CASE("Challenge and AUTH survive encoding and decoding") {
  Challenge c = MakeChallenge();
  auto decoded = DecodeChallenge(EncodeChallenge(c));
  REQUIRE(decoded.ok());
  CHECK(decoded->magic == kHandshakeMagic);
  CHECK(decoded->version == kProtocolVersion);
  CHECK(decoded->server_nonce == c.server_nonce);

  AuthRequest a = Answer(c, kSecret, "job-1", PeerRole::kAgent, 7);
  auto back = DecodeAuth(EncodeAuth(a));
  REQUIRE(back.ok());
  CHECK(back->version == 2);
  CHECK(back->role == PeerRole::kAgent);
  CHECK(back->job_id == "job-1");
  CHECK(back->generation == 7);
  CHECK(back->client_nonce == a.client_nonce);
  CHECK(back->client_proof == a.client_proof);
}

TEST_CASE("VerifyAuth accepts the right secret and job and the client accepts the server proof") {
  Challenge c = MakeChallenge();
  AuthRequest a = Answer(c);
  CHECK_FALSE(VerifyAuth(c, a, "job-1", kSecret).has_value());
  CHECK(VerifyServerProof(ServerProof(kSecret, c, a), kSecret, c, a).ok());
}

TEST_CASE("VerifyAuth rejects a wrong secret without naming it") {
  Challenge c = MakeChallenge();
  AuthRequest a = Answer(c, "the-wrong-secret");
  auto rejection = VerifyAuth(c, a, "job-1", kSecret);
  REQUIRE(rejection.has_value());
  CHECK(rejection->reason == AuthRejectReason::kBadProof);
  CHECK(rejection->message.find(std::string(kSecret)) == std::string::npos);
  CHECK(rejection->message.find("the-wrong-secret") == std::string::npos);
  CHECK(RejectionToStatus(*rejection).code() == StatusCode::kUnauthenticated);
}

TEST_CASE("VerifyAuth rejects another job's client even with the right secret") {
  Challenge c = MakeChallenge();
  AuthRequest a = Answer(c, kSecret, "job-2");
  auto rejection = VerifyAuth(c, a, "job-1", kSecret);
  REQUIRE(rejection.has_value());
  CHECK(rejection->reason == AuthRejectReason::kWrongJob);
  CHECK(RejectionToStatus(*rejection).code() == StatusCode::kUnauthenticated);
}

TEST_CASE("The proof binds the role, the job and the nonces") {
  Challenge c = MakeChallenge();
  SUBCASE("a proof made for one role does not pass for another") {
    AuthRequest a = Answer(c, kSecret, "job-1", PeerRole::kStoreClient);
    a.role = PeerRole::kAgent;
    auto r = VerifyAuth(c, a, "job-1", kSecret);
    REQUIRE(r.has_value());
    CHECK(r->reason == AuthRejectReason::kBadProof);
  }
  SUBCASE("a proof made for one generation does not pass for another") {
    AuthRequest a = Answer(c, kSecret, "job-1", PeerRole::kStoreClient, 1);
    CHECK_FALSE(VerifyAuth(c, a, "job-1", kSecret).has_value());
    a.generation = 2;
    auto r = VerifyAuth(c, a, "job-1", kSecret);
    REQUIRE(r.has_value());
    CHECK(r->reason == AuthRejectReason::kBadProof);
    // Nor does the server's proof for generation 1 convince a client of generation 2.
    AuthRequest one = Answer(c, kSecret, "job-1", PeerRole::kStoreClient, 1);
    CHECK(VerifyServerProof(ServerProof(kSecret, c, one), kSecret, c, a).code() ==
          StatusCode::kUnauthenticated);
  }
  SUBCASE("a recorded AUTH does not answer a fresh challenge") {
    AuthRequest a = Answer(c);
    Challenge fresh = c;
    fresh.server_nonce = std::string(kNonceBytes, 't');
    CHECK(VerifyAuth(fresh, a, "job-1", kSecret).has_value());
  }
  SUBCASE("the client proof is not a valid server proof") {
    AuthRequest a = Answer(c);
    Status st = VerifyServerProof(a.client_proof, kSecret, c, a);
    CHECK(st.code() == StatusCode::kUnauthenticated);
  }
}

TEST_CASE("A protocol version mismatch is refused on both sides") {
  Challenge c = MakeChallenge();
  c.version = kProtocolVersion + 1;
  auto answer = AnswerChallenge(c, kSecret, PeerRole::kStoreClient, "job-1", 0,
                                std::string(kNonceBytes, 'c'));
  CHECK(answer.status().code() == StatusCode::kFailedPrecondition);

  Challenge server = MakeChallenge();
  AuthRequest a = Answer(server);
  a.version = kProtocolVersion + 1;
  auto decoded = DecodeAuth(EncodeAuth(a));
  REQUIRE(decoded.ok());
  auto r = VerifyAuth(server, *decoded, "job-1", kSecret);
  REQUIRE(r.has_value());
  CHECK(r->reason == AuthRejectReason::kVersionMismatch);
  CHECK(RejectionToStatus(*r).code() == StatusCode::kFailedPrecondition);
}

TEST_CASE("Handshake decoders reject malformed payloads") {
  CHECK_FALSE(DecodeChallenge("").ok());
  CHECK_FALSE(
      DecodeChallenge(wire::ByteWriter().U32(0x12345678).U32(1).Raw(std::string(32, 'n')).Take())
          .ok());
  CHECK_FALSE(
      DecodeChallenge(wire::ByteWriter().U32(kHandshakeMagic).U32(1).Raw("short").Take()).ok());
  AuthRequest a = Answer(MakeChallenge());
  std::string encoded = EncodeAuth(a);
  CHECK_FALSE(DecodeAuth(encoded.substr(0, encoded.size() - 1)).ok());
  CHECK_FALSE(DecodeAuth(encoded + "x").ok());
  CHECK_FALSE(DecodeAuth("").ok());
  CHECK_FALSE(DecodeAuthOk("short").ok());
  CHECK_FALSE(DecodeAuthRejected("").ok());
  auto rejected = DecodeAuthRejected(EncodeAuthRejected({AuthRejectReason::kWrongJob, "nope"}));
  REQUIRE(rejected.ok());
  CHECK(rejected->reason == AuthRejectReason::kWrongJob);
  CHECK(rejected->message == "nope");
}

TEST_CASE("AUTH is laid out as version, role, job id, generation, nonce, proof") {
  AuthRequest a = Answer(MakeChallenge(), kSecret, "j", PeerRole::kStoreClient, 258);
  std::string expected = wire::ByteWriter()
                             .U32(2)
                             .U8(1)
                             .String("j")
                             .I32(258)
                             .Raw(a.client_nonce)
                             .Raw(a.client_proof)
                             .Take();
  CHECK(EncodeAuth(a) == expected);
}

TEST_CASE("A negative generation is refused on both sides") {
  Challenge c = MakeChallenge();
  auto answer = AnswerChallenge(c, kSecret, PeerRole::kStoreClient, "job-1", -1,
                                std::string(kNonceBytes, 'c'));
  CHECK(answer.status().code() == StatusCode::kInvalidArgument);
  AuthRequest a = Answer(c);
  a.generation = -1;
  auto decoded = DecodeAuth(EncodeAuth(a));
  CHECK(decoded.status().code() == StatusCode::kInvalidArgument);
  CHECK(decoded.status().message() == "AUTH generation is negative");
}

TEST_CASE("FenceGeneration admits store clients of the current generation only") {
  CHECK_FALSE(FenceGeneration(PeerRole::kStoreClient, "job-1", 3, 3).has_value());
  SUBCASE("an older store client is stale: its generation is over") {
    auto r = FenceGeneration(PeerRole::kStoreClient, "job-1", 1, 3);
    REQUIRE(r.has_value());
    CHECK(r->reason == AuthRejectReason::kStaleGeneration);
    CHECK(r->message == "generation 1 of job 'job-1' is over (the job is at generation 3)");
    Status st = RejectionToStatus(*r);
    CHECK(st.code() == StatusCode::kAborted);
    CHECK(st.message() == "endpoint rejected the connection: " + r->message);
  }
  SUBCASE("a newer store client is refused: its generation has not started") {
    auto r = FenceGeneration(PeerRole::kStoreClient, "job-1", 5, 3);
    REQUIRE(r.has_value());
    CHECK(r->reason == AuthRejectReason::kFutureGeneration);
    CHECK(r->message == "generation 5 of job 'job-1' has not started (the job is at generation 3)");
    CHECK(RejectionToStatus(*r).code() == StatusCode::kFailedPrecondition);
  }
  SUBCASE("agents are not fenced: they stay across generations") {
    CHECK_FALSE(FenceGeneration(PeerRole::kAgent, "job-1", 0, 3).has_value());
    CHECK_FALSE(FenceGeneration(PeerRole::kAgent, "job-1", 5, 3).has_value());
  }
}

TEST_CASE("The generation rejections survive encoding with their reason") {
  for (AuthRejectReason reason :
       {AuthRejectReason::kStaleGeneration, AuthRejectReason::kFutureGeneration}) {
    auto back = DecodeAuthRejected(EncodeAuthRejected({reason, "m"}));
    REQUIRE(back.ok());
    CHECK(back->reason == reason);
    CHECK(static_cast<int>(back->reason) == (reason == AuthRejectReason::kStaleGeneration ? 6 : 7));
  }
}

TEST_CASE("An unknown role value is rejected") {
  Challenge c = MakeChallenge();
  AuthRequest a = Answer(c);
  a.role = static_cast<PeerRole>(9);
  auto r = VerifyAuth(c, a, "job-1", kSecret);
  REQUIRE(r.has_value());
  CHECK(r->reason == AuthRejectReason::kUnknownRole);
  CHECK(r->message.find("role-9") != std::string::npos);
}

}  // namespace
}  // namespace dslaunch
