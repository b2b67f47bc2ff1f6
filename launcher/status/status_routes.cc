#include "launcher/status/status_routes.h"

#include <charconv>
#include <map>

#include "common/display_text.h"
#include "launcher/status/job_view_json.h"
#include "launcher/status/page_assets.h"
#include "launcher/status/prometheus_text.h"

namespace dslaunch::launcher {
namespace {

constexpr char kJson[] = "application/json";
// The page may load only what it came with: no CDN, no outside fetch (issue 13).
constexpr char kPagePolicy[] = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'";

StatusReply Error(int status, std::string message) {
  return {status, kTextPlain, std::move(message) + "\n", {{"Cache-Control", "no-store"}}};
}

StatusReply Live(std::string content_type, std::string body) {
  return {200, std::move(content_type), std::move(body), {{"Cache-Control", "no-store"}}};
}

// The query's parameters; kInvalidArgument text for a malformed or repeated one.
Result<std::map<std::string, std::string>> QueryParameters(std::string_view target) {
  std::map<std::string, std::string> params;
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return params;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    std::string key(item.substr(0, eq));
    std::string value(eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1));
    if (!params.emplace(key, value).second) return InvalidArgumentError("parameter '" + key + "' given twice");
  }
  return params;
}

// A non-negative decimal parameter.
Result<int64_t> Count(const std::string& name, const std::string& text) {
  int64_t v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0) {
    return InvalidArgumentError(name + "='" + text + "': expected a whole number >= 0");
  }
  return v;
}

StatusReply Logs(std::string_view target, const JobBoard& board) {
  auto params = QueryParameters(target);
  if (!params.ok()) return Error(400, "/api/logs: " + params.status().message());
  for (const auto& [key, value] : *params) {
    if (key != "rank" && key != "lines") return Error(400, "/api/logs: unknown parameter '" + key + "' (rank, lines)");
  }
  auto rank_text = params->find("rank");
  if (rank_text == params->end()) return Error(400, "/api/logs: missing rank=N");
  auto rank = Count("rank", rank_text->second);
  if (!rank.ok()) return Error(400, "/api/logs: " + rank.status().message());
  int64_t lines = kDefaultLogLines;
  if (auto it = params->find("lines"); it != params->end()) {
    auto n = Count("lines", it->second);
    if (!n.ok() || *n == 0 || *n > static_cast<int64_t>(kLogTailLines)) {
      return Error(400, "/api/logs: lines='" + it->second + "': expected 1 to " + std::to_string(kLogTailLines) +
                            " (the lines the launcher keeps per rank)");
    }
    lines = *n;
  }
  const JobView view = board.View();
  bool known = false;
  for (const RankView& r : view.ranks) known = known || r.rank == *rank;
  if (!known) {
    return Error(404, "/api/logs: job " + view.job_id + " has no rank " + std::to_string(*rank) + " (it has " +
                          std::to_string(view.ranks.size()) + " ranks)");
  }
  std::string body;
  // As text for a page or a terminal: a program's escape sequences and stray bytes are shown
  // escaped, never interpreted (the log files keep the bytes as written).
  for (const std::string& line : board.LogTail(static_cast<int>(*rank), static_cast<size_t>(lines))) {
    body += DisplayText(line) + "\n";
  }
  return Live(kTextPlain, std::move(body));
}

}  // namespace

std::string_view TargetPath(std::string_view target) { return target.substr(0, target.find('?')); }

bool IsEventStream(std::string_view method, std::string_view target) {
  return method == "GET" && TargetPath(target) == "/api/events";
}

StatusReply Respond(std::string_view method, std::string_view target, const JobBoard& board) {
  if (method != "GET" && method != "HEAD") {
    StatusReply r = Error(405, "method " + std::string(method) + " not allowed: the status server answers GET and HEAD");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  const std::string_view path = TargetPath(target);
  if (path == "/api/job") return Live(kJson, JobViewJson(board.View()));
  if (path == "/metrics") return Live(kPrometheusContentType, PrometheusText(board.View()));
  if (path == "/api/logs") return Logs(target, board);
  if (path == "/api/events") return Error(400, "/api/events is a stream of server-sent events: GET it, not HEAD");
  if (const PageAsset* asset = FindPageAsset(path); asset != nullptr) {
    return {200, std::string(asset->content_type), std::string(asset->body),
            {{"Content-Security-Policy", kPagePolicy}, {"Cache-Control", "no-cache"},
             {"Referrer-Policy", "no-referrer"}}};  // the page's URL holds the token
  }
  return Error(404, "no such path: " + std::string(path) + " (try /, /api/job, /api/events, /api/logs?rank=N, /metrics)");
}

std::string EventFrame(const std::string& json) { return "data: " + json + "\n\n"; }

}  // namespace dslaunch::launcher
