// The client side of the launcher's endpoint: connect, authenticate, exchange frames. Plain POSIX
// sockets and poll (no Asio), so workers can link it cheaply. Protocol: docs/protocol.md.
//
// Every function here is thread-safe in the sense that it touches no shared state; a given socket
// must not be read (or written) by two threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/auth/handshake.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "common/wire.h"

namespace dslaunch {

// While the launcher is not up yet, connection attempts are retried with a delay that starts here
// and doubles up to kConnectRetryMaxDelay: quick when everything starts together, gentle on a
// launcher that takes seconds to come up.
inline constexpr std::chrono::milliseconds kConnectRetryInitialDelay{10};
inline constexpr std::chrono::milliseconds kConnectRetryMaxDelay{500};

struct HostPort {
  std::string host;  // without brackets for IPv6
  uint16_t port = 0;
};

// An address of this form names a Unix-domain socket: a node's store proxy, served by its
// dslaunch-agent (docs/protocol.md, "Store proxy"), e.g. "unix:/tmp/dslaunch-J-n0-42/store.sock".
inline constexpr std::string_view kUnixAddressPrefix = "unix:";

// The socket path of a "unix:PATH" address; nullopt for any other address.
std::optional<std::string> UnixSocketPath(std::string_view address);

// Splits "host:port", "[v6addr]:port" or "v4addr:port". kInvalidArgument for anything else
// (a bare IPv6 address without brackets is ambiguous and rejected).
Result<HostPort> ParseHostPort(std::string_view address);

// Connects to the endpoint at `address` (host:port; IPv4, IPv6 or a host name; or unix:PATH, a
// node's store proxy, which is not retried: a missing or refusing socket is kUnavailable "the
// node's store proxy at PATH is gone (its dslaunch-agent exited or was killed)") and authenticates
// as `role` of generation `generation` (the restart count, >= 0) of job `job_id`. Refused
// connections, unreachable hosts and names that do not resolve yet are retried until `deadline`
// (the launcher may not be listening yet); then the handshake runs, bounded by the same deadline.
// Returns a connected, blocking socket with TCP_NODELAY and close-on-exec set, positioned exactly
// after AUTH_OK (the handshake never reads further, so frames the server's session handler sends at
// once are all still in the socket); the caller owns it. Errors: kInvalidArgument (bad address),
// kDeadlineExceeded (nothing answered in time; the message has the last connect error),
// kUnauthenticated (wrong secret or job id, or the server could not prove it holds the secret),
// kAborted (a store client whose generation is over: the job has restarted without it),
// kFailedPrecondition (protocol version mismatch, role not served, a store client of a generation
// that has not started), kUnavailable (the connection broke during the handshake). A rejection is
// never retried. Messages never contain the secret.
Result<UniqueFd> ConnectToEndpoint(const std::string& address, std::string_view job_id,
                                   std::string_view secret, PeerRole role, int generation,
                                   std::chrono::steady_clock::time_point deadline);

// Waits until `fd` is readable (or at EOF). kDeadlineExceeded when `deadline` passes first
// (steady_clock::time_point::max() waits for ever).
Status WaitReadable(int fd, std::chrono::steady_clock::time_point deadline);

// Writes one whole frame. Blocks until written (also on a non-blocking socket, by polling).
// kInvalidArgument if 1 + payload.size() exceeds wire::kMaxFrameBytes (nothing is sent);
// kUnavailable if the peer has gone (no SIGPIPE is raised).
Status SendFrame(int fd, uint8_t type, std::string_view payload);

// Returns the next frame from `fd`, using `decoder` for bytes already received (keep one decoder
// per socket for its whole life). kDeadlineExceeded if no whole frame arrives by `deadline`
// (steady_clock::time_point::max() waits for ever), kUnavailable if the peer closed the
// connection, kInvalidArgument for a malformed or oversized frame (the stream is then unusable).
Result<wire::Frame> ReceiveFrame(int fd, wire::FrameDecoder& decoder,
                                 std::chrono::steady_clock::time_point deadline);

}  // namespace dslaunch
