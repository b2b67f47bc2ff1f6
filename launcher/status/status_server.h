// StatusServer: the launcher's HTTP server for the live page, the JSON API, log tails and
// /metrics (docs/observability.md). It runs on a thread and io_context of its own, so a slow or
// hostile client never delays the launcher's own loop; it only reads the JobBoard the launcher
// publishes to. What it answers is status_routes.h's; this is the Boost.Beast shell around it
// (Beast and Asio stay inside status_server.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "launcher/status/job_board.h"

namespace dslaunch::launcher {

struct StatusServerOptions {
  std::string bind_address = "127.0.0.1";  // an IPv4 or IPv6 address (--status_bind)
  uint16_t port = 0;                       // 0: any free port (--status_port 0)
};

class StatusServer {
 public:
  // Binds and starts serving. Errors: kInvalidArgument when bind_address is not an IP address;
  // otherwise the bind's error, "cannot listen on 127.0.0.1:8080: Address already in use".
  static Result<std::unique_ptr<StatusServer>> Start(const StatusServerOptions& options,
                                                     std::shared_ptr<const JobBoard> board);
  // Stops serving: closes the listener and every connection, joins the thread.
  ~StatusServer();

  uint16_t port() const;
  // "http://127.0.0.1:PORT/" ("http://[::1]:PORT/" for IPv6).
  std::string Url() const;

  class Impl;

 private:
  explicit StatusServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dslaunch::launcher
