// StatusServer: the launcher's HTTP server for the live page, the JSON API, log tails and
// /metrics (docs/observability.md). It runs on a thread and io_context of its own, so a slow or
// hostile client never delays the launcher's own loop; it only reads the JobBoard the launcher
// publishes to. Who may read it is status_access.h's (Host header, the job's token); what it
// answers is status_routes.h's; how many connections it holds and for how long is
// connection_pool.h's and the deadlines below. This is the Boost.Beast shell around them (Beast
// and Asio stay inside status_server.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "launcher/status/connection_pool.h"
#include "launcher/status/job_board.h"
#include "launcher/status/status_access.h"

namespace dslaunch::launcher {

// A new connection has this long to send its whole request (head and any body), and a kept-alive
// one this long from the first byte of its next request: a browser sends a request in one
// packet, so 5 s is ample on any link, and a slowloris client that dribbles bytes holds its
// connection no longer.
inline constexpr std::chrono::seconds kStatusHeaderTimeout{5};
// A kept-alive connection with no new request for this long is closed: the page's own requests
// come every 2 s, so its connection stays in use; an idle one costs a descriptor for nothing.
inline constexpr std::chrono::seconds kStatusIdleTimeout{15};
// A client has this long to take each response (and each event of a stream): a client that
// stops reading is closed instead of holding its buffers for ever.
inline constexpr std::chrono::seconds kStatusWriteTimeout{10};
// Request connections at once: a browser opens up to 6 per server, `dslaunch status` and a
// Prometheus scraper one each; 64 is room for several people and their tabs. When full, a new
// connection takes the place of the one that has waited longest for a request
// (connection_pool.h), so idle or slow clients cannot lock the page.
inline constexpr size_t kStatusMaxRequestConnections = 64;
// Of them from one source address: a browser's 6 and some. One address, however it behaves,
// holds at most a quarter of the pool, and its own new connections replace its idle ones.
inline constexpr size_t kStatusMaxRequestConnectionsPerClient = 16;
// Event streams (/api/events) at once, in a pool of their own: a stream is open for as long as
// its page is, and must not take a request connection's place. One per open tab.
inline constexpr size_t kStatusMaxEventStreams = 32;
// Of them from one source address: a person's open tabs. Beyond it the stream gets 503 and the
// page polls /api/job instead.
inline constexpr size_t kStatusMaxEventStreamsPerClient = 8;

// When the server stops (the launcher exits after the job ended), every open event stream is sent
// the board's last view, if it has not had it, before its connection is closed, within this
// time: so an open page learns how the job ended (docs/observability.md, "After the end"). A
// client that reads takes it in milliseconds; one that does not holds the launcher's exit no
// longer than this.
inline constexpr std::chrono::seconds kStatusFinalFlushTimeout{2};

struct StatusServerLimits {
  std::chrono::milliseconds header_timeout = kStatusHeaderTimeout;
  std::chrono::milliseconds idle_timeout = kStatusIdleTimeout;
  std::chrono::milliseconds write_timeout = kStatusWriteTimeout;
  std::chrono::milliseconds final_flush_timeout = kStatusFinalFlushTimeout;
  PoolLimits requests{kStatusMaxRequestConnections, kStatusMaxRequestConnectionsPerClient};
  PoolLimits streams{kStatusMaxEventStreams, kStatusMaxEventStreamsPerClient};
};

struct StatusServerOptions {
  std::string bind_address = "127.0.0.1";  // an IPv4 or IPv6 address (--status_bind)
  uint16_t port = 0;                       // 0: any free port (--status_port 0)
  StatusAccess access;                     // the token (required), --status_host, --status_metrics_open
  StatusServerLimits limits;               // tests shorten the deadlines
};

// How many connections the server holds now, for tests and diagnostics.
struct StatusServerLoad {
  size_t requests = 0;  // request connections (the request pool)
  size_t streams = 0;   // event streams (the stream pool)
};

class StatusServer {
 public:
  // Binds and starts serving. Errors: kInvalidArgument when bind_address is not an IP address
  // or the access has no token; otherwise the bind's error, "cannot listen on 127.0.0.1:8080:
  // Address already in use".
  static Result<std::unique_ptr<StatusServer>> Start(const StatusServerOptions& options,
                                                     std::shared_ptr<const JobBoard> board);
  // Stops serving: closes the listener, sends every event stream the board's view as it is now
  // (unless that stream had it already) and closes it, waiting for that at most
  // limits.final_flush_timeout; then closes every other connection and joins the thread.
  ~StatusServer();

  uint16_t port() const;
  // "http://127.0.0.1:PORT/" ("http://[::1]:PORT/" for IPv6), without the token.
  std::string Url() const;
  // Thread-safe.
  StatusServerLoad Load() const;

  class Impl;

 private:
  explicit StatusServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dslaunch::launcher
