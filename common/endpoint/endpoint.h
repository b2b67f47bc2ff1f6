// The launcher's single TCP endpoint: accepts connections, authenticates each with the job's
// secret (common/auth/handshake.h), then hands it to the session handler registered for the role the
// peer declared (the rendezvous store for PeerRole::kStoreClient, the agent control plane for
// PeerRole::kAgent). Protocol: docs/protocol.md.
//
// Threading: everything runs on the thread that runs the io_context passed to Listen (one thread).
// EndpointConnection and SessionHandler methods are called, and must be called, only there.
// Endpoint::Stop() is the exception: it may be called from any thread.
//
// Failure isolation: a malformed, oversized (wire::kMaxFrameBytes) or unauthenticated frame, a
// handshake that does not finish within kHandshakeTimeout (EndpointOptions), or a handler returning
// an error closes that one connection and nothing else.
//
// Before authentication (docs/protocol.md, "Connections before authentication"): at most
// HandshakeLimits connections are in their handshake, in total and per source address
// (common/endpoint/handshake_admission.h); a connection over a bound is closed at once, before the
// CHALLENGE, and its client retries. Refusals and failed handshakes are logged through a
// RefusalReport (common/endpoint/refusal_report.h): an episode's first at once, then one summary line
// every refusal_report_interval, however many addresses they come from. Handshake work runs at most kHandshakeStepsPerTurn steps
// per turn of the event loop, behind the authenticated connections' ready work, so no number of
// connecting peers can starve the store or the agents.
//
// Generation fencing (docs/protocol.md, "Generations and fencing"): the endpoint is at one
// generation at a time (0 at Listen, raised by BeginGeneration). A store client
// (PeerRole::kStoreClient) must present exactly that generation in its AUTH: an older one is
// refused with kStaleGeneration, a newer one with kFutureGeneration. Agents are not fenced: they
// stay across generations.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/auth/handshake.h"
#include "common/endpoint/handshake_admission.h"
#include "common/endpoint/refusal_report.h"
#include "common/status.h"
#include "common/wire.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace dslaunch {

// A peer that has not finished the handshake by then is closed: a legitimate client answers the
// challenge within one round trip (3 s leaves room for a loaded node), and a silent peer must not
// hold one of the HandshakeLimits slots for longer.
inline constexpr std::chrono::seconds kHandshakeTimeout{3};
// Connections beyond EndpointOptions::max_connections are closed on accept. This default fits every
// rank of a few hundred 8-GPU nodes plus their agents; the launcher sizes the bound from the job's
// plan and its descriptor limit instead (launcher/machine/connection_budget.h), and raises its soft
// descriptor limit to the hard one at start, so that this bound, not the descriptor limit, is
// what a flood meets.
inline constexpr size_t kDefaultMaxEndpointConnections = 8192;
// Handshake steps (a new connection's CHALLENGE, reading and checking its AUTH) run at most this
// many per turn of the event loop, after the authenticated connections' ready work: an
// authenticated request waits behind at most this many, however many peers are connecting.
inline constexpr size_t kHandshakeStepsPerTurn = 16;
// Before authentication a peer may send only this much: an AUTH is under 400 bytes, so an
// anonymous peer cannot make the launcher buffer a 16 MiB frame.
inline constexpr size_t kMaxHandshakeBytes = 4096;
// A connection whose unsent frames exceed this is closed: the peer has stopped reading, and the
// launcher must not buffer without bound on its behalf.
inline constexpr size_t kMaxQueuedSendBytes = 4 * static_cast<size_t>(wire::kMaxFrameBytes);
// Close() flushes queued frames for at most this long before dropping the connection anyway.
inline constexpr std::chrono::seconds kCloseFlushTimeout{5};

// One authenticated connection. Owned jointly (shared_ptr) by the endpoint and the session
// handler; calls after the connection closed are ignored.
class EndpointConnection {
 public:
  virtual ~EndpointConnection() = default;
  // Queues a frame; never blocks. A payload over wire::kMaxFrameBytes - 1, or a send queue over
  // kMaxQueuedSendBytes, closes the connection (reported through OnClose).
  virtual void Send(uint8_t type, std::string payload) = 0;
  // Flushes the queued frames (at most kCloseFlushTimeout), then closes. No OnFrame after this;
  // OnClose follows with an OK status, never from inside Close() itself.
  virtual void Close() = 0;
  // "ip:port" of the peer ("[v6addr]:port" for IPv6).
  virtual const std::string& peer() const = 0;
  // The role the peer authenticated as.
  virtual PeerRole role() const = 0;
  // The generation the peer authenticated with (its AUTH's generation field).
  virtual int generation() const = 0;
};

// One per authenticated connection, created by the SessionFactory of its role.
class SessionHandler {
 public:
  virtual ~SessionHandler() = default;
  // A frame from the peer. A non-OK status closes this connection (only it); the status is
  // logged and passed to OnClose.
  virtual Status OnFrame(wire::Frame frame) = 0;
  // Called exactly once, when the connection is gone: OK after Close(), kUnavailable when the peer
  // closed or the socket failed, kAborted when the endpoint stopped, or the error that closed it.
  // The handler is destroyed soon after; it must not call the connection from its destructor.
  virtual void OnClose(const Status& why) = 0;
};

// Creates the handler for a freshly authenticated connection. Returning nullptr closes it.
using SessionFactory =
    std::function<std::unique_ptr<SessionHandler>(std::shared_ptr<EndpointConnection>)>;

// Receives the endpoint's log lines: closes of authenticated connections with errors, accept
// failures, and refused or failed handshakes (bounded by a RefusalReport). Called on the
// io_context thread. Never contains the secret. The default writes "dslaunch endpoint: <line>" to
// stderr.
using EndpointLogger = std::function<void(std::string_view)>;

struct EndpointOptions {
  std::string bind_address = "127.0.0.1";  // IP literal or host name
  uint16_t port = 0;                       // 0: an ephemeral port, published by port()
  std::string job_id;                      // required
  std::string secret;                      // required; never logged
  EndpointLogger log;                      // optional
  // Open connections (authenticated or in their handshake) beyond which new ones are refused at
  // accept; the launcher sizes it from the plan (launcher/machine/connection_budget.h).
  size_t max_connections = kDefaultMaxEndpointConnections;
  // Tests change these; production keeps the defaults.
  std::chrono::milliseconds handshake_timeout = kHandshakeTimeout;
  HandshakeLimits handshake_limits;
  std::chrono::milliseconds refusal_report_interval = kRefusalReportInterval;
};

class Endpoint {
 public:
  // Binds and starts accepting (the accepts run when `io` runs). Fails with kInvalidArgument for
  // an empty job id or secret or an unresolvable address, kUnavailable (or kInternal) if the bind
  // fails. `io` must outlive the Endpoint and every connection it accepted.
  static Result<std::unique_ptr<Endpoint>> Listen(boost::asio::io_context& io,
                                                  EndpointOptions options);
  // Stops the endpoint (see Stop).
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // The port actually bound.
  uint16_t port() const;
  // Routes authenticated connections of `role` to `factory`, replacing any earlier one. A peer
  // declaring a role with no factory is rejected (AUTH_REJECTED, unknown role). Call on the
  // io_context thread, or before the io_context runs.
  void SetSessionFactory(PeerRole role, SessionFactory factory);
  // Moves the job to `generation` (>= generation(); checked; the same value is a no-op). From now
  // on a store client is admitted only with this generation, and every open store-client
  // connection of an older one is closed at once, without flushing (its handler sees OnClose with
  // kAborted, "generation 1 of job 'J' is over (the job is at generation 2)"); connections still
  // in their handshake are checked against the new generation when their AUTH arrives. Agent
  // connections are left alone (the job runner ends their store proxy sessions itself). Call on the io_context thread before starting any worker of
  // `generation` (a worker that connects earlier is refused as of a future generation).
  void BeginGeneration(int generation);
  // Sets the limit of EndpointOptions::max_connections for connections accepted from now on
  // (open ones stay). io_context thread. Node mode knows the job's size only once its nodes joined.
  void SetMaxConnections(size_t limit);
  // The current generation (0 until BeginGeneration). io_context thread.
  int generation() const;
  // Bytes written to connections so far (store replies, control messages, handshakes), every
  // role. Call on the io_context thread.
  uint64_t bytes_sent() const;
  // Closes the acceptor and every connection (their handlers see OnClose(kAborted)) but those
  // already closing with Close(), which finish writing their frames first (at most
  // kCloseFlushTimeout), and logs the summary of refusals not yet reported. Thread-safe; carried out on the io_context thread (at
  // once when called there). Idempotent.
  void Stop();

  class Impl;

 private:
  explicit Endpoint(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace dslaunch
