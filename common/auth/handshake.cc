#include "common/auth/handshake.h"

#include "common/auth/sha256.h"
#include "common/wire.h"

namespace dslaunch {
namespace {

// Domain-separation labels: a client proof can never be replayed as a server proof.
constexpr std::string_view kClientProofLabel = "dslaunch-client-proof-v1";
constexpr std::string_view kServerProofLabel = "dslaunch-server-proof-v1";

std::string Transcript(std::string_view label, const Challenge& c, const AuthRequest& a) {
  wire::ByteWriter w;
  w.Raw(label)
      .U32(a.version)
      .Raw(c.server_nonce)
      .Raw(a.client_nonce)
      .U8(static_cast<uint8_t>(a.role))
      .String(a.job_id)
      .I32(a.generation);
  return w.Take();
}

bool IsKnownRole(uint8_t r) {
  return r == static_cast<uint8_t>(PeerRole::kStoreClient) ||
         r == static_cast<uint8_t>(PeerRole::kAgent) || r == static_cast<uint8_t>(PeerRole::kSnapshotPeer);
}

}  // namespace

std::string PeerRoleName(PeerRole role) {
  switch (role) {
    case PeerRole::kStoreClient: return "store-client";
    case PeerRole::kAgent: return "agent";
    case PeerRole::kSnapshotPeer: return "snapshot-peer";
  }
  return "role-" + std::to_string(static_cast<int>(role));
}

std::string EncodeChallenge(const Challenge& c) {
  return wire::ByteWriter().U32(c.magic).U32(c.version).Raw(c.server_nonce).Take();
}

Result<Challenge> DecodeChallenge(std::string_view payload) {
  wire::ByteReader r(payload);
  Challenge c;
  r.U32(c.magic);
  r.U32(c.version);
  r.Raw(kNonceBytes, c.server_nonce);
  if (!r.ok() || c.magic != kHandshakeMagic) {
    return InvalidArgumentError("not a dslaunch endpoint (bad CHALLENGE)");
  }
  // A newer server may append fields after the nonce; the version check decides compatibility.
  return c;
}

std::string EncodeAuth(const AuthRequest& a) {
  return wire::ByteWriter()
      .U32(a.version)
      .U8(static_cast<uint8_t>(a.role))
      .String(a.job_id)
      .I32(a.generation)
      .Raw(a.client_nonce)
      .Raw(a.client_proof)
      .Take();
}

Result<AuthRequest> DecodeAuth(std::string_view payload) {
  wire::ByteReader r(payload);
  AuthRequest a;
  uint8_t role = 0;
  r.U32(a.version);
  if (!r.ok()) return InvalidArgumentError("AUTH too short");
  if (a.version != kProtocolVersion) return a;  // the rest may be laid out differently
  r.U8(role);
  r.String(a.job_id);
  r.I32(a.generation);
  r.Raw(kNonceBytes, a.client_nonce);
  r.Raw(kSha256DigestBytes, a.client_proof);
  if (!r.Finished()) return InvalidArgumentError("malformed AUTH");
  if (a.job_id.size() > kMaxJobIdBytes) return InvalidArgumentError("AUTH job id too long");
  if (a.generation < 0) return InvalidArgumentError("AUTH generation is negative");
  a.role = static_cast<PeerRole>(role);
  return a;
}

std::string EncodeAuthOk(std::string_view server_proof) { return std::string(server_proof); }

Result<std::string> DecodeAuthOk(std::string_view payload) {
  if (payload.size() != kSha256DigestBytes) return InvalidArgumentError("malformed AUTH_OK");
  return std::string(payload);
}

std::string EncodeAuthRejected(const AuthRejection& r) {
  return wire::ByteWriter().U8(static_cast<uint8_t>(r.reason)).String(r.message).Take();
}

Result<AuthRejection> DecodeAuthRejected(std::string_view payload) {
  wire::ByteReader r(payload);
  uint8_t reason = 0;
  AuthRejection out;
  r.U8(reason);
  r.String(out.message);
  if (!r.Finished()) return InvalidArgumentError("malformed AUTH_REJECTED");
  out.reason = static_cast<AuthRejectReason>(reason);
  return out;
}

std::string ClientProof(std::string_view secret, const Challenge& c, const AuthRequest& a) {
  return DigestBytes(HmacSha256(secret, Transcript(kClientProofLabel, c, a)));
}

std::string ServerProof(std::string_view secret, const Challenge& c, const AuthRequest& a) {
  return DigestBytes(HmacSha256(secret, Transcript(kServerProofLabel, c, a)));
}

Result<AuthRequest> AnswerChallenge(const Challenge& c, std::string_view secret, PeerRole role,
                                    std::string_view job_id, int generation,
                                    std::string client_nonce) {
  if (c.version != kProtocolVersion) {
    return FailedPreconditionError("endpoint speaks protocol version " + std::to_string(c.version) +
                                   ", this program speaks " + std::to_string(kProtocolVersion));
  }
  if (job_id.size() > kMaxJobIdBytes) {
    return InvalidArgumentError("job id of " + std::to_string(job_id.size()) +
                                " bytes exceeds the limit of " + std::to_string(kMaxJobIdBytes));
  }
  if (generation < 0) {
    return InvalidArgumentError("generation must be >= 0, got " + std::to_string(generation));
  }
  AuthRequest a;
  a.version = kProtocolVersion;
  a.role = role;
  a.job_id = std::string(job_id);
  a.generation = generation;
  a.client_nonce = std::move(client_nonce);
  a.client_proof = ClientProof(secret, c, a);
  return a;
}

std::optional<AuthRejection> VerifyAuth(const Challenge& c, const AuthRequest& a,
                                        std::string_view job_id, std::string_view secret) {
  if (a.version != c.version) {
    return AuthRejection{AuthRejectReason::kVersionMismatch,
                         "client speaks protocol version " + std::to_string(a.version) +
                             ", endpoint speaks " + std::to_string(c.version)};
  }
  if (!IsKnownRole(static_cast<uint8_t>(a.role))) {
    return AuthRejection{AuthRejectReason::kUnknownRole, "unknown role " + PeerRoleName(a.role)};
  }
  if (a.job_id != job_id) {
    return AuthRejection{AuthRejectReason::kWrongJob,
                         "job id '" + a.job_id + "' is not the job served by this endpoint"};
  }
  if (!ConstantTimeEquals(a.client_proof, ClientProof(secret, c, a))) {
    return AuthRejection{AuthRejectReason::kBadProof,
                         "authentication failed for job '" + a.job_id + "' (wrong secret)"};
  }
  return std::nullopt;
}

std::optional<AuthRejection> FenceGeneration(PeerRole role, std::string_view job_id, int generation,
                                             int current_generation) {
  if (role != PeerRole::kStoreClient || generation == current_generation) return std::nullopt;
  std::string what =
      "generation " + std::to_string(generation) + " of job '" + std::string(job_id) + "'";
  std::string now = " (the job is at generation " + std::to_string(current_generation) + ")";
  if (generation < current_generation) {
    return AuthRejection{AuthRejectReason::kStaleGeneration, what + " is over" + now};
  }
  return AuthRejection{AuthRejectReason::kFutureGeneration, what + " has not started" + now};
}

std::variant<AuthRequest, AuthRejection> CheckAuth(const Challenge& c, std::string_view auth_payload,
                                                   std::string_view job_id, std::string_view secret,
                                                   int current_generation) {
  auto auth = DecodeAuth(auth_payload);
  if (!auth.ok()) return AuthRejection{AuthRejectReason::kMalformed, auth.status().message()};
  std::optional<AuthRejection> rejection = VerifyAuth(c, *auth, job_id, secret);
  if (!rejection) rejection = FenceGeneration(auth->role, auth->job_id, auth->generation, current_generation);
  if (rejection) return std::move(*rejection);
  return std::move(*auth);
}

Status VerifyServerProof(std::string_view server_proof, std::string_view secret, const Challenge& c,
                         const AuthRequest& a) {
  if (!ConstantTimeEquals(server_proof, ServerProof(secret, c, a))) {
    return UnauthenticatedError(
        "endpoint failed to prove it holds the job's secret (wrong secret, "
        "or another job's launcher on that port)");
  }
  return Status::Ok();
}

Status RejectionToStatus(const AuthRejection& r) {
  std::string m = "endpoint rejected the connection: " + r.message;
  switch (r.reason) {
    case AuthRejectReason::kStaleGeneration: return AbortedError(std::move(m));
    case AuthRejectReason::kVersionMismatch:
    case AuthRejectReason::kUnknownRole:
    case AuthRejectReason::kFutureGeneration: return FailedPreconditionError(std::move(m));
    case AuthRejectReason::kMalformed:
    case AuthRejectReason::kWrongJob:
    case AuthRejectReason::kBadProof: return UnauthenticatedError(std::move(m));
  }
  return UnauthenticatedError(std::move(m));
}

}  // namespace dslaunch
