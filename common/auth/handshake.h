// The authentication handshake that opens every connection to the launcher's endpoint.
// Pure code: encoding, decoding and verification only; the endpoint (server) and
// ConnectToEndpoint (client) move the frames. Specified in docs/protocol.md, "Handshake".
//
//   server -> client  CHALLENGE      {u32 magic, u32 version, raw[32] server_nonce}
//   client -> server  AUTH           {u32 version, u8 role, string job_id, i32 generation,
//                                     raw[32] client_nonce, raw[32] client_proof}
//   server -> client  AUTH_OK        {raw[32] server_proof}
//                  or AUTH_REJECTED  {u8 reason, string message}, then the server closes.
//
//   client_proof = HMAC-SHA256(secret, "dslaunch-client-proof-v1" || transcript)
//   server_proof = HMAC-SHA256(secret, "dslaunch-server-proof-v1" || transcript)
//   transcript   = u32 version || raw server_nonce || raw client_nonce || u8 role || string job_id
//                  || i32 generation
//
// Both sides prove they hold the secret (the client checks server_proof), the fresh server nonce
// stops replay of a recorded AUTH, and binding role, job id and generation into the proof stops a
// proof for one role, job or generation from being reused for another. `generation` is the
// client's restart count (a store client's DSLAUNCH_RESTART_COUNT; an agent's, the generation it
// was started for): the endpoint refuses store clients of any generation but the current one
// (FenceGeneration). Every function is thread-safe. No Status produced here contains the secret.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "common/status.h"

namespace dslaunch {

// "DSLH": lets a client that reached some other service fail with a clear message.
inline constexpr uint32_t kHandshakeMagic = 0x44534c48;
// Bumped on any incompatible change to the handshake or to a message after it.
// Version 2 added the generation to AUTH and to the transcript.
inline constexpr uint32_t kProtocolVersion = 2;
// Nonce size: 256 bits, so a nonce never repeats across the life of any job.
inline constexpr size_t kNonceBytes = 32;
// Job ids are short identifiers; a longer one in AUTH is garbage, not a job.
inline constexpr size_t kMaxJobIdBytes = 256;

// An agent's store proxy carries its workers' store requests on the agent's own connection
// (docs/protocol.md, "Store proxy"): it has no role of its own. kSnapshotPeer: an agent sending
// its node's in-memory snapshots to a peer node's agent (docs/protocol.md, "Snapshot copies").
enum class PeerRole : uint8_t { kStoreClient = 1, kAgent = 2, kSnapshotPeer = 3 };

// "store-client", "agent", or "role-<n>" for an unknown value.
std::string PeerRoleName(PeerRole role);

// Why a server refused an AUTH. Sent to the client in AUTH_REJECTED.
enum class AuthRejectReason : uint8_t {
  kMalformed = 1,         // AUTH did not decode
  kVersionMismatch = 2,   // client speaks another protocol version
  kUnknownRole = 3,       // no service for that role on this endpoint
  kWrongJob = 4,          // the client belongs to another job
  kBadProof = 5,          // the client does not hold this job's secret
  kStaleGeneration = 6,   // a store client of a generation that is over
  kFutureGeneration = 7,  // a store client of a generation that has not started
};

struct Challenge {
  uint32_t magic = kHandshakeMagic;
  uint32_t version = kProtocolVersion;
  std::string server_nonce;  // kNonceBytes
};

struct AuthRequest {
  uint32_t version = kProtocolVersion;
  PeerRole role = PeerRole::kStoreClient;
  std::string job_id;
  int32_t generation = 0;    // >= 0
  std::string client_nonce;  // kNonceBytes
  std::string client_proof;  // 32 bytes
};

struct AuthRejection {
  AuthRejectReason reason = AuthRejectReason::kMalformed;
  std::string message;  // human-readable, never contains the secret
};

// Payload encoders/decoders. Decoders fail with kInvalidArgument on a truncated payload, trailing
// bytes, a wrong magic, a nonce of the wrong size or (AUTH) a negative generation.
std::string EncodeChallenge(const Challenge& c);
Result<Challenge> DecodeChallenge(std::string_view payload);
std::string EncodeAuth(const AuthRequest& a);
Result<AuthRequest> DecodeAuth(std::string_view payload);
std::string EncodeAuthOk(std::string_view server_proof);
Result<std::string> DecodeAuthOk(std::string_view payload);
std::string EncodeAuthRejected(const AuthRejection& r);
Result<AuthRejection> DecodeAuthRejected(std::string_view payload);

// The two proofs (32 raw bytes each) over the transcript described above.
std::string ClientProof(std::string_view secret, const Challenge& c, const AuthRequest& a);
std::string ServerProof(std::string_view secret, const Challenge& c, const AuthRequest& a);

// Client side: the AUTH answering `c`, with the given fresh client nonce. Fails with
// kFailedPrecondition if the server speaks another protocol version, kInvalidArgument for a
// negative generation or a job id over kMaxJobIdBytes.
Result<AuthRequest> AnswerChallenge(const Challenge& c, std::string_view secret, PeerRole role,
                                    std::string_view job_id, int generation,
                                    std::string client_nonce);

// Server side: checks an AUTH against the challenge this server sent. Returns std::nullopt when
// the client is accepted, otherwise the rejection to send (a reason and a message fit for both
// the client and the log). Checked in order: version, role value, job id, proof; the proof is
// compared in constant time. Whether the endpoint has a service for the role is the caller's check.
std::optional<AuthRejection> VerifyAuth(const Challenge& c, const AuthRequest& a,
                                        std::string_view job_id, std::string_view secret);

// Server side, after VerifyAuth accepted a peer: std::nullopt if a peer of `role` and
// `generation` may connect while job `job_id` is at `current_generation`, otherwise the
// rejection. Store clients must be of the current generation: an older one is kStaleGeneration
// ("generation 1 of job 'J' is over (the job is at generation 3)"), a newer one
// kFutureGeneration ("generation 5 of job 'J' has not started (the job is at generation 3)").
// Agents are not fenced here: they stay across generations, and the launcher checks the
// generation of their messages itself.
std::optional<AuthRejection> FenceGeneration(PeerRole role, std::string_view job_id, int generation,
                                             int current_generation);

// Server side, the whole check of one AUTH payload, shared by every server of the handshake (the
// launcher's endpoint and an agent's store proxy): DecodeAuth (a malformed one is kMalformed),
// VerifyAuth, then FenceGeneration against `current_generation`. Returns the accepted request or
// the rejection to send. Whether the server has a service for the role is the caller's check.
std::variant<AuthRequest, AuthRejection> CheckAuth(const Challenge& c, std::string_view auth_payload,
                                                   std::string_view job_id, std::string_view secret,
                                                   int current_generation);

// Client side: checks the server's proof from AUTH_OK (kUnauthenticated if wrong: whoever answered
// does not hold the secret).
Status VerifyServerProof(std::string_view server_proof, std::string_view secret, const Challenge& c,
                         const AuthRequest& a);

// Client side: the Status for an AUTH_REJECTED: kAborted for a stale generation (that generation
// is over: the worker should exit, not retry), kFailedPrecondition for a version mismatch, an
// unknown role or a future generation (retrying cannot help), kUnauthenticated otherwise.
Status RejectionToStatus(const AuthRejection& r);

}  // namespace dslaunch
