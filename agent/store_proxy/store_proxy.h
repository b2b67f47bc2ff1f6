// StoreProxy: the I/O shell of an agent's store proxy (docs/protocol.md, "Store proxy"). It serves
// the node's workers on a Unix-domain socket with the launcher's own handshake and store protocol,
// and carries their requests to the launcher on one connection per generation (PeerRole::
// kStoreProxy, PROXIED frames), combined by a RequestCombiner (agent/store_proxy/
// request_combiner.h), which makes every decision; this file only moves bytes.
//
// Generations: BeginGeneration(g) closes the local connections of the previous generation (their
// blocked calls fail with kUnavailable, as on the direct path) and opens g's upstream. Workers must
// authenticate with generation g: an older one is refused as stale (kAborted at the worker), a
// newer one as future. When g's upstream breaks, g is over on this node: its local connections
// are closed and reconnects are refused as stale. Each request's keys are checked against
// "gen/<g>/" of the worker's connection (CheckGenerationKeys), and again by the launcher.
//
// Threading: everything on the agent's io_context thread. The socket file is removed when the
// proxy is destroyed; a proxy killed with its agent leaves it for the agent's directory sweep,
// and workers see "the node's store proxy ... is gone".
#pragma once

#include <chrono>
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

// The agent opens its upstream right after the launcher sent the generation's assignment, so the
// launcher is up; a node that cannot reach it within this long fails its start (AGENT_FAILED)
// instead of starting workers without a store.
inline constexpr std::chrono::seconds kStoreProxyConnectTimeout{10};
// Local connections served at once: many more than a node has ranks and tools; a runaway local
// client is refused at accept beyond it.
inline constexpr size_t kMaxLocalStoreConnections = 4096;
// The name of the socket in the agent's private directory.
inline constexpr char kStoreProxySocketName[] = "store.sock";

struct StoreProxyOptions {
  std::string socket_path;       // where to listen (in the agent's private 0700 directory)
  std::string launcher_address;  // host:port of the launcher's endpoint
  std::string job_id;
  std::string secret;                       // never logged
  std::function<void(std::string_view)> log;  // one line each; the agent prefixes it
};

class StoreProxy {
 public:
  // Listens on options.socket_path. kInvalidArgument for a path too long for a Unix socket
  // (the caller falls back to the direct path), an errno error if it cannot bind.
  static Result<std::unique_ptr<StoreProxy>> Listen(boost::asio::io_context& io,
                                                    StoreProxyOptions options);
  ~StoreProxy();
  StoreProxy(const StoreProxy&) = delete;
  StoreProxy& operator=(const StoreProxy&) = delete;

  // Moves to `generation` (greater than the previous one): closes the previous generation's
  // local connections and upstream, then connects and authenticates g's upstream, blocking for at
  // most kStoreProxyConnectTimeout. On error the proxy serves no generation until the next call.
  Status BeginGeneration(int generation);

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
