#include "launcher/status/status_routes.h"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "launcher/status/prometheus_text.h"
#include "tests/launcher/status/sample_view.h"

namespace dslaunch::launcher {
namespace {

void Fill(JobBoard& board) {
  board.Publish(testing::SampleView());
  for (int i = 0; i < 300; ++i) board.AppendLog(1, "line " + std::to_string(i));
}

bool OneLine(const std::string& body) { return !body.empty() && body.find('\n') == body.size() - 1; }

TEST_CASE("Respond serves the page and its assets, compiled in") {
  JobBoard board;
  Fill(board);
  const StatusReply page = Respond("GET", "/", board);
  CHECK(page.status == 200);
  CHECK(page.content_type.starts_with("text/html"));
  CHECK(page.body.find("id=\"ranks\"") != std::string::npos);
  CHECK(page.body.find("src=\"/status.js\"") != std::string::npos);
  CHECK(Respond("GET", "/status.js", board).body.find("EventSource") != std::string::npos);
  CHECK(Respond("GET", "/status.css", board).content_type.starts_with("text/css"));
  // Nothing from outside: no absolute URL in any asset but the SVG namespace.
  for (const char* path : {"/", "/status.js", "/status.css"}) {
    std::string body = Respond("GET", path, board).body;
    for (size_t at = body.find("http"); at != std::string::npos; at = body.find("http", at + 1)) {
      CAPTURE(path);
      CHECK(body.compare(at, 26, "http://www.w3.org/2000/svg") == 0);
    }
  }
}

TEST_CASE("Respond gives the job as JSON and the metrics as Prometheus text") {
  JobBoard board;
  Fill(board);
  const StatusReply job = Respond("GET", "/api/job?x=1", board);
  CHECK(job.status == 200);
  CHECK(job.content_type == "application/json");
  CHECK(nlohmann::json::parse(job.body)["ranks"].size() == 4);
  const StatusReply metrics = Respond("GET", "/metrics", board);
  CHECK(metrics.content_type == kPrometheusContentType);
  CHECK(metrics.body == PrometheusText(testing::SampleView()));
  CHECK(Respond("HEAD", "/metrics", board).status == 200);
}

TEST_CASE("Respond gives a rank's log tail") {
  JobBoard board;
  Fill(board);
  CHECK(Respond("GET", "/api/logs?rank=1&lines=2", board).body == "line 298\nline 299\n");
  const StatusReply dflt = Respond("GET", "/api/logs?rank=1", board);
  CHECK(dflt.status == 200);
  CHECK(dflt.body.starts_with("line 100\n"));
  CHECK(Respond("GET", "/api/logs?rank=0", board).body.empty());  // a rank that printed nothing yet
  // A program's escape sequences and invalid UTF-8 are shown escaped, as text (common/display_text.h).
  board.AppendLog(2, "\x1b[31mred\x1b[0m\r \xC3( ok\tcaf\xC3\xA9");
  CHECK(Respond("GET", "/api/logs?rank=2", board).body == "\\x1b[31mred\\x1b[0m\\x0d \xEF\xBF\xBD( ok\tcaf\xC3\xA9\n");
}

TEST_CASE("Respond answers bad requests with a 4xx and one line saying why") {
  JobBoard board;
  Fill(board);
  struct Case {
    const char* method;
    const char* target;
    int status;
    const char* says;
  };
  const Case cases[] = {
      {"GET", "/api/logs", 400, "missing rank=N"},
      {"GET", "/api/logs?rank=x", 400, "rank='x': expected a whole number >= 0"},
      {"GET", "/api/logs?rank=-1", 400, "expected a whole number"},
      {"GET", "/api/logs?rank=1&lines=0", 400, "lines='0': expected 1 to 1000"},
      {"GET", "/api/logs?rank=1&lines=5000", 400, "expected 1 to 1000"},
      {"GET", "/api/logs?rank=1&rank=2", 400, "parameter 'rank' given twice"},
      {"GET", "/api/logs?rank=1&color=red", 400, "unknown parameter 'color'"},
      {"GET", "/api/logs?rank=9", 404, "has no rank 9 (it has 4 ranks)"},
      {"GET", "/nope", 404, "no such path: /nope"},
      {"POST", "/api/job", 405, "method POST not allowed"},
      {"DELETE", "/", 405, "not allowed"},
      {"HEAD", "/api/events", 400, "stream of server-sent events"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.method);
    CAPTURE(c.target);
    const StatusReply r = Respond(c.method, c.target, board);
    CHECK(r.status == c.status);
    CHECK(r.body.find(c.says) != std::string::npos);
    CHECK(OneLine(r.body));
  }
  const StatusReply post = Respond("POST", "/", board);
  REQUIRE(post.headers.size() == 2);
  CHECK(post.headers[1].first == "Allow");
}

TEST_CASE("IsEventStream is a GET of /api/events, with or without a query") {
  CHECK(IsEventStream("GET", "/api/events"));
  CHECK(IsEventStream("GET", "/api/events?since=1"));
  CHECK(!IsEventStream("HEAD", "/api/events"));
  CHECK(!IsEventStream("GET", "/api/eventsx"));
  CHECK(EventFrame("{}") == "data: {}\n\n");
}

}  // namespace
}  // namespace dslaunch::launcher
