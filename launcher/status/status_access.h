// Who may read the status server (docs/observability.md, "Who can read it"; docs/security.md,
// "The status page"): pure checks of a request's Host header and of the job's token, before
// status_routes.h's Respond() sees it. The server calls CheckAccess() for every request.
//
//   1. Host: a request must name this server. Its host (the port aside) must be the address the
//      connection arrived on, `localhost` when that address is loopback, or a name the user gave
//      (--status_host). A web page that reaches the port through its own name (DNS rebinding)
//      sends that name and is refused with 403.
//   2. Token: every path but the page's static assets (/status.css, /status.js, the same bytes in
//      every dslaunch) needs the job's token, as `?token=TOKEN` or `Authorization: Bearer TOKEN`;
//      /metrics too unless --status_metrics_open. Without it: 401 saying where the token is.
//      Tokens are compared in constant time.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "launcher/status/status_routes.h"

namespace dslaunch::launcher {

struct StatusAccess {
  std::string token;                    // the job's token (GenerateSecret(): 64 hex characters)
  std::vector<std::string> host_names;  // --status_host: more names the page is reached by (the
                                        // server adds its bound address: 0.0.0.0 for a wildcard)
  bool metrics_open = false;            // --status_metrics_open: /metrics without the token
  std::string token_file;               // where the job's user reads the token, for the 401 text
};

// What CheckAccess reads of a request.
struct RequestHead {
  std::string_view method;
  std::string_view target;               // "/api/logs?rank=1&token=..."
  std::optional<std::string_view> host;  // the Host header; nullopt when the request has none
  std::string_view authorization;        // the Authorization header; empty when none
};

// Ok when `host` ("HOST[:PORT]", "[V6][:PORT]") names this server: HOST is the IP address the
// connection arrived on (`local_address` as the socket gives it; an IPv4-mapped IPv6 address
// counts as its IPv4 address), `localhost` when that address is loopback, or one of `names`
// (case-insensitive). The port is not compared: an SSH or kubectl port-forward serves the page
// under another port, and a rebinding page is told apart by its name, not its port.
// kFailedPrecondition otherwise, the message saying which host was refused and what to do;
// kInvalidArgument when there is no Host header.
Status CheckHost(std::optional<std::string_view> host, std::string_view local_address,
                 const std::vector<std::string>& names);

// The values of every `token` parameter of `target`'s query.
std::vector<std::string> TokenParameters(std::string_view target);

// `target` without its `token` parameters ("/api/logs?token=T&rank=1" -> "/api/logs?rank=1").
std::string WithoutToken(std::string_view target);

// Whether `path` is served without the token: the page's static assets.
bool IsPublicPath(std::string_view path);

struct AccessDecision {
  std::optional<StatusReply> refusal;  // set: answer this, and nothing else
  std::string target;                  // allowed: the target for Respond(), without its token
};

// The Host check, then the token check (in that order: a rebinding page learns nothing more than
// a 403). Refusals: 400 without a Host header, 403 for another host, 401 (with
// `WWW-Authenticate: Bearer`) without the right token; every body one line saying what to do.
AccessDecision CheckAccess(const StatusAccess& access, const RequestHead& head, std::string_view local_address);

}  // namespace dslaunch::launcher
