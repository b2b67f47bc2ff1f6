#include "launcher/status/status_access.h"

#include <doctest/doctest.h>

namespace dslaunch::launcher {
namespace {

constexpr char kToken[] = "feedfeedfeedfeedfeedfeedfeedfeedfeedfeedfeedfeedfeedfeedfeedfeed";

StatusAccess Access() {
  StatusAccess a;
  a.token = kToken;
  a.token_file = "/tmp/dslaunch-1000/running/j.json";
  return a;
}

TEST_CASE("CheckHost accepts the address the connection came in on, localhost on loopback, and given names") {
  struct Case {
    const char* host;
    const char* local;
    bool ok;
  };
  const Case cases[] = {
      {"127.0.0.1:8080", "127.0.0.1", true},
      {"127.0.0.1", "127.0.0.1", true},
      {"127.0.0.1:9000", "127.0.0.1", true},  // a port-forward's own port
      {"127.0.0.1:", "127.0.0.1", true},      // an empty port is allowed by RFC 9110
      {"localhost:8080", "127.0.0.1", true},
      {"LOCALHOST.:8080", "127.0.0.1", true},
      {"localhost:8080", "::1", true},
      {"[::1]:8080", "::1", true},
      {"[0:0::1]", "::1", true},
      {"127.0.0.1:8080", "::ffff:127.0.0.1", true},  // a v4 client of a dual-stack socket
      {"localhost", "::ffff:127.0.0.1", true},
      {"10.1.2.3:8080", "10.1.2.3", true},
      {"node7.cluster:80", "10.1.2.3", true},   // a --status_host name, in any case
      {"NODE7.cluster", "10.1.2.3", true},
      {"localhost:8080", "10.1.2.3", false},    // not loopback: localhost is some other machine's
      {"127.0.0.1:8080", "10.1.2.3", false},
      {"127.0.0.2:8080", "127.0.0.1", false},
      {"attacker.example:8080", "127.0.0.1", false},
      {"attacker.example", "127.0.0.1", false},
      {"127.0.0.1.nip.io:8080", "127.0.0.1", false},
      {"localhost.attacker.example", "127.0.0.1", false},
      {"::1", "::1", false},                    // IPv6 without brackets
      {"127.0.0.1:99999", "127.0.0.1", false},  // not a port
      {"127.0.0.1:80x", "127.0.0.1", false},
      {"[::1", "::1", false},
      {"[::1]x", "::1", false},
      {":8080", "127.0.0.1", false},
      {"", "127.0.0.1", false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.host);
    CAPTURE(c.local);
    CHECK(CheckHost(std::string_view(c.host), c.local, {"node7.cluster"}).ok() == c.ok);
  }
  const Status no_host = CheckHost(std::nullopt, "127.0.0.1", {});
  CHECK(no_host.code() == StatusCode::kInvalidArgument);
  CHECK(no_host.message() == "the request has no Host header (HTTP/1.1 requires one)");
  const Status bad = CheckHost(std::string_view("a\x01" "b:1"), "10.0.0.1", {});
  CHECK(bad.code() == StatusCode::kFailedPrecondition);
  CHECK(bad.message() == "Host 'a?b:1' is not this server (10.0.0.1): a page that reaches it under another name is "
                         "refused (DNS rebinding); to open it under a name of this machine, start the job with "
                         "--status_host NAME");
  CHECK(CheckHost(std::string_view("x:1:2"), "10.0.0.1", {}).message() == "Host 'x:1:2' is not HOST[:PORT]");
}

TEST_CASE("TokenParameters and WithoutToken find and strip the token parameter only") {
  CHECK(TokenParameters("/api/logs?rank=1&token=abc&lines=2") == std::vector<std::string>{"abc"});
  CHECK(TokenParameters("/?token=a&token=b") == std::vector<std::string>{"a", "b"});
  CHECK(TokenParameters("/?token") == std::vector<std::string>{""});
  CHECK(TokenParameters("/?tokens=a&xtoken=b").empty());
  CHECK(TokenParameters("/").empty());
  CHECK(WithoutToken("/api/logs?token=abc&rank=1&lines=2") == "/api/logs?rank=1&lines=2");
  CHECK(WithoutToken("/api/logs?rank=1&token=abc") == "/api/logs?rank=1");
  CHECK(WithoutToken("/?token=abc") == "/");
  CHECK(WithoutToken("/?tokens=1&token=2&&x") == "/?tokens=1&&x");
  CHECK(WithoutToken("/metrics") == "/metrics");
}

RequestHead Head(std::string_view target, std::string_view authorization = "") {
  return {"GET", target, std::string_view("127.0.0.1:8080"), authorization};
}

TEST_CASE("CheckAccess lets the token's holder in, by query or Bearer header, and passes the target on without it") {
  const StatusAccess a = Access();
  const std::string token(kToken);
  const AccessDecision query = CheckAccess(a, Head("/api/logs?rank=1&token=" + token), "127.0.0.1");
  CHECK(!query.refusal);
  CHECK(query.target == "/api/logs?rank=1");
  const AccessDecision bearer = CheckAccess(a, Head("/api/job", "Bearer " + token), "127.0.0.1");
  CHECK(!bearer.refusal);
  CHECK(bearer.target == "/api/job");
  CHECK(!CheckAccess(a, Head("/", "bearer  " + token), "127.0.0.1").refusal);
  CHECK(!CheckAccess(a, Head("/status.js"), "127.0.0.1").refusal);
  CHECK(!CheckAccess(a, Head("/status.css?v=1"), "127.0.0.1").refusal);
}

TEST_CASE("CheckAccess refuses without the token (401), and a foreign Host first (403)") {
  StatusAccess a = Access();
  const std::string tail =
      ": open the URL with ?token= that the launcher printed ('dslaunch: status page at ...'), or send 'Authorization: "
      "Bearer TOKEN' with the token from /tmp/dslaunch-1000/running/j.json (readable by the job's user only)\n";
  for (const char* target : {"/", "/index.html", "/api/job", "/api/events", "/api/logs?rank=0", "/metrics", "/x"}) {
    CAPTURE(target);
    const AccessDecision none = CheckAccess(a, Head(target), "127.0.0.1");
    REQUIRE(none.refusal);
    CHECK(none.refusal->status == 401);
    CHECK(none.refusal->body == "status page: this needs the job's token" + tail);
    REQUIRE(none.refusal->headers.size() == 2);
    CHECK(none.refusal->headers[1] == std::pair<std::string, std::string>{"WWW-Authenticate", "Bearer realm=\"dslaunch\""});
  }
  const std::string almost = std::string(kToken).substr(0, 63) + "0";
  const std::string std_token(kToken);
  struct Case {
    std::string target;
    std::string authorization;
  };
  const Case wrong[] = {
      {"/api/job?token=" + almost, ""},
      {"/api/job?token=" + std_token.substr(0, 10), ""},
      {"/api/job?token=" + std_token + "0", ""},
      {"/api/job?token=", ""},
      {"/api/job", "Bearer " + almost},
      {"/api/job", "Basic " + std_token},
      {"/api/job", "Bearer"},
  };
  for (const Case& c : wrong) {
    CAPTURE(c.target);
    CAPTURE(c.authorization);
    const AccessDecision d = CheckAccess(a, Head(c.target, c.authorization), "127.0.0.1");
    REQUIRE(d.refusal);
    CHECK(d.refusal->status == 401);
  }
  CHECK(CheckAccess(a, Head("/api/job?token=" + almost), "127.0.0.1").refusal->body == "status page: wrong token" + tail);
  // An empty token never matches an empty one.
  StatusAccess empty = Access();
  empty.token.clear();
  CHECK(CheckAccess(empty, Head("/api/job?token="), "127.0.0.1").refusal->status == 401);
  // The Host is checked before the token: a rebinding page learns no more than 403.
  const RequestHead rebound{"GET", "/api/job?token=" + std_token, std::string_view("evil.example:8080"), ""};
  const AccessDecision foreign = CheckAccess(a, rebound, "127.0.0.1");
  REQUIRE(foreign.refusal);
  CHECK(foreign.refusal->status == 403);
  CHECK(foreign.refusal->body.starts_with("status page: Host 'evil.example:8080' is not this server (127.0.0.1 or localhost)"));
  const RequestHead hostless{"GET", "/status.js", std::nullopt, ""};
  CHECK(CheckAccess(a, hostless, "127.0.0.1").refusal->status == 400);
}

TEST_CASE("CheckAccess opens /metrics, and only /metrics, with metrics_open") {
  StatusAccess a = Access();
  a.metrics_open = true;
  CHECK(!CheckAccess(a, Head("/metrics"), "127.0.0.1").refusal);
  CHECK(CheckAccess(a, Head("/api/job"), "127.0.0.1").refusal->status == 401);
  CHECK(CheckAccess(a, Head("/metrics/x"), "127.0.0.1").refusal->status == 401);
}

}  // namespace
}  // namespace dslaunch::launcher
