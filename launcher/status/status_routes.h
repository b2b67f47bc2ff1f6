// What the status server answers to each request (docs/observability.md, "Endpoints"): the
// routing and the bodies, pure of sockets, so that tests call it directly. status_server.cc
// only moves bytes. Every error body is one line saying what was wrong.
//
//   GET /                      the page (HTML); /status.css and /status.js its assets
//   GET /api/job               the JobView as JSON (job_view_json.h)
//   GET /api/events            server-sent events (the server streams them; see IsEventStream)
//   GET /api/logs?rank=N&lines=K   the last K (default kDefaultLogLines) lines of rank N
//   GET /metrics               Prometheus text (prometheus_text.h)
// HEAD is GET without a body; other methods get 405, unknown paths 404, bad parameters 400.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "launcher/status/job_board.h"

namespace dslaunch::launcher {

// Lines of a rank's output /api/logs returns without `lines=`: a screenful and more.
inline constexpr size_t kDefaultLogLines = 200;

// The content type of the page's plain-text replies (errors, /metrics).
inline constexpr char kTextPlain[] = "text/plain; charset=utf-8";

struct StatusReply {
  int status = 200;
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra ones (Allow, Cache-Control, ...)
};

// The path of a request target ("/api/logs?rank=1" -> "/api/logs").
std::string_view TargetPath(std::string_view target);

// True for a GET of /api/events, which the server answers with a stream, not with Respond().
bool IsEventStream(std::string_view method, std::string_view target);

// The reply to `method` `target` from what `board` holds now.
StatusReply Respond(std::string_view method, std::string_view target, const JobBoard& board);

// One server-sent event carrying `json` (one line: JobViewJson writes no newline).
std::string EventFrame(const std::string& json);

}  // namespace dslaunch::launcher
