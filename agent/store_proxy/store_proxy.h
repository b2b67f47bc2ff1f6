// StoreProxy: the I/O shell of an agent's store proxy (docs/protocol.md, "Store proxy"). It serves
// the node's workers on a Unix-domain socket with the launcher's own handshake and store protocol,
// and carries their requests to the launcher as PROXIED frames on the agent's control connection
// (the agent passes the proxy a function that queues a frame there, and hands it the PROXIED_REPLY
// frames it reads), combined by a RequestCombiner (agent/store_proxy/request_combiner.h), which
// makes every decision; this file only moves bytes.
//
// Generations: BeginGeneration(g) closes the local connections of the previous generation (their
// blocked calls fail with kUnavailable, as on the direct path) and serves g. Workers must
// authenticate with generation g: an older one is refused as stale (kAborted at the worker), a
// newer one as future. EndGeneration() (the agent calls it before it sends AGENT_DONE or
// AGENT_FAILED of g, and when it loses the launcher) makes g over on this node: its local
// connections are closed, nothing of g is sent upstream any more, and reconnects are refused as
// stale. Each request's keys are checked against "gen/<g>/" of the worker's connection
// (CheckGenerationKeys), and again by the launcher.
//
// Threading: everything on the agent's io_context thread. The socket file is removed when the
// proxy is destroyed; a proxy killed with its agent leaves it for the agent's directory sweep,
// and workers see "the node's store proxy ... is gone".
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace dslaunch::agent {

// Local connections served at once: many more than a node has ranks and tools; a runaway local
// client is refused at accept beyond it.
inline constexpr size_t kMaxLocalStoreConnections = 4096;
// The name of the socket in the agent's private directory.
inline constexpr char kStoreProxySocketName[] = "store.sock";

struct StoreProxyOptions {
  std::string socket_path;  // where to listen (in the agent's private 0700 directory)
  std::string job_id;
  std::string secret;  // never logged
  // Queues one PROXIED payload on the agent's control connection, in order with its control
  // messages. Required. Called on the io_context thread.
  std::function<void(std::string payload)> send_upstream;
  // Lines about a broken upstream (a malformed reply); the agent prefixes them.
  std::function<void(std::string_view)> log;
};

class StoreProxy {
 public:
  // Listens on options.socket_path. kInvalidArgument for a path too long for a Unix socket,
  // kUnavailable if it cannot bind (the agent then falls back to the direct path).
  static Result<std::unique_ptr<StoreProxy>> Listen(boost::asio::io_context& io,
                                                    StoreProxyOptions options);
  ~StoreProxy();
  StoreProxy(const StoreProxy&) = delete;
  StoreProxy& operator=(const StoreProxy&) = delete;

  // Moves to `generation` (greater than the previous one): ends the previous one (EndGeneration)
  // and serves workers of `generation`.
  void BeginGeneration(int generation);
  // The current generation is over on this node (idempotent): its local connections are closed
  // (a call in the proxy fails with kUnavailable at the worker), its requests are dropped, and
  // nothing of it is sent upstream any more; a worker of it that reconnects is refused as stale.
  void EndGeneration();
  // A PROXIED_REPLY payload read on the control connection. A reply to a request of an ended
  // generation is dropped; a malformed one, or one naming a tag never sent, ends the generation
  // with a log line (the launcher is broken).
  void OnUpstreamReply(std::string_view payload);

  // "unix:<socket path>": what the workers get as DSLAUNCH_STORE.
  std::string address() const;
  // Requests received from workers, and requests sent to the launcher, so far.
  uint64_t local_requests() const;
  uint64_t upstream_requests() const;

  class Impl;

 private:
  explicit StoreProxy(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace dslaunch::agent
