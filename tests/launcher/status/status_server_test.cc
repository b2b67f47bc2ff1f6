// The status server over real TCP on 127.0.0.1, with a board the test fills: what a browser and a
// Prometheus scraper get, who may read it (the token, the Host header), bad requests, the event
// stream, the bounds on connections (slow, idle and streaming clients from one or many source
// addresses of 127.0.0.0/8), the deadlines, and the server's end.
#include "launcher/status/status_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "launcher/status/job_view_json.h"
#include "launcher/status/status_client.h"
#include "tests/launcher/status/sample_view.h"
#include "tests/support/raw_connection.h"
#include "tests/support/subprocess.h"

namespace dslaunch::launcher {
namespace {

using testing::RawConnection;
using testing::WaitFor;

constexpr char kToken[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
constexpr auto kWait = std::chrono::seconds(20);

StatusServerOptions Options() {
  StatusServerOptions o;
  o.access.token = kToken;
  o.access.token_file = "/run/user/JOB.json";
  return o;
}

struct Served {
  std::shared_ptr<JobBoard> board = std::make_shared<JobBoard>();
  std::unique_ptr<StatusServer> server;
  explicit Served(StatusServerOptions options = Options()) {
    board->Publish(testing::SampleView());
    board->AppendLog(0, "hello from rank 0");
    auto s = StatusServer::Start(options, board);
    REQUIRE(s.ok());
    server = std::move(*s);
  }
  std::string host() const { return "127.0.0.1:" + std::to_string(server->port()); }
};

// A GET from `source` with the token and the right Host; the whole response.
std::string Get(uint16_t port, const std::string& target, const char* source = "127.0.0.1") {
  RawConnection c(port, source);
  c.Send("GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\nAuthorization: Bearer " +
         kToken + "\r\nConnection: close\r\n\r\n");
  return c.Read("\r\n\r\n");
}

TEST_CASE("StatusServer serves the page, the job, the metrics and log tails over TCP to the token's holder") {
  Served s;
  CHECK(s.server->Url() == "http://127.0.0.1:" + std::to_string(s.server->port()) + "/");
  auto page = HttpGet(s.server->Url(), kToken, "/");
  REQUIRE(page.ok());
  CHECK(page->status == 200);
  CHECK(page->body.find("<table id=\"ranks\">") != std::string::npos);
  auto job = HttpGet(s.server->Url(), kToken, "/api/job");
  REQUIRE(job.ok());
  CHECK(nlohmann::json::parse(job->body)["job_id"] == testing::SampleView().job_id);
  auto metrics = HttpGet(s.server->Url(), kToken, "/metrics");
  REQUIRE(metrics.ok());
  CHECK(metrics->body.find("dslaunch_ranks{state=\"failed\"} 1\n") != std::string::npos);
  auto logs = HttpGet(s.server->Url(), kToken, "/api/logs?rank=0&lines=5");
  REQUIRE(logs.ok());
  CHECK(logs->body == "hello from rank 0\n");
  auto missing = HttpGet(s.server->Url(), kToken, "/api/logs?rank=7");
  REQUIRE(missing.ok());
  CHECK(missing->status == 404);
  // The token in the URL, as the page's address and its event stream carry it; the routes never see it.
  auto query = HttpGet(s.server->Url(), "", "/api/logs?token=" + std::string(kToken) + "&rank=0&lines=5");
  REQUIRE(query.ok());
  CHECK(query->status == 200);
  CHECK(query->body == "hello from rank 0\n");
}

TEST_CASE("StatusServer answers 401 without the job's token, except for the page's static assets") {
  Served s;
  const std::string says =
      ": open the URL with ?token= that the launcher printed ('dslaunch: status page at ...'), or send "
      "'Authorization: Bearer TOKEN' with the token from /run/user/JOB.json (readable by the job's user only)\n";
  for (const char* target : {"/", "/api/job", "/api/logs?rank=0", "/metrics", "/api/events", "/index.html", "/nope"}) {
    CAPTURE(target);
    auto none = HttpGet(s.server->Url(), "", target);
    REQUIRE(none.ok());
    CHECK(none->status == 401);
    CHECK(none->body == "status page: this needs the job's token" + says);
    auto wrong = HttpGet(s.server->Url(), std::string(kToken).replace(63, 1, "0"), target);
    REQUIRE(wrong.ok());
    CHECK(wrong->status == 401);
    CHECK(wrong->body == "status page: wrong token" + says);
  }
  auto short_token = HttpGet(s.server->Url(), "", "/api/job?token=0123");
  REQUIRE(short_token.ok());
  CHECK(short_token->status == 401);
  for (const char* asset : {"/status.js", "/status.css"}) {
    auto r = HttpGet(s.server->Url(), "", asset);
    REQUIRE(r.ok());
    CHECK(r->status == 200);
  }
  RawConnection c(s.server->port());
  c.Send("GET /api/job HTTP/1.1\r\nHost: " + s.host() + "\r\nConnection: close\r\n\r\n");
  const std::string reply = c.Read("\r\n\r\n");
  CHECK(reply.starts_with("HTTP/1.1 401"));
  CHECK(reply.find("WWW-Authenticate: Bearer realm=\"dslaunch\"\r\n") != std::string::npos);
}

TEST_CASE("StatusServer serves /metrics without the token only with --status_metrics_open") {
  StatusServerOptions open = Options();
  open.access.metrics_open = true;
  Served s(open);
  auto metrics = HttpGet(s.server->Url(), "", "/metrics");
  REQUIRE(metrics.ok());
  CHECK(metrics->status == 200);
  CHECK(metrics->body.find("dslaunch_job_info{job_id=\"20261125-101500-abc123\"} 1\n") != std::string::npos);
  auto job = HttpGet(s.server->Url(), "", "/api/job");
  REQUIRE(job.ok());
  CHECK(job->status == 401);
}

TEST_CASE("StatusServer refuses a Host header that does not name it (DNS rebinding), and a request without one") {
  Served s;
  const std::string port = std::to_string(s.server->port());
  auto ask = [&](const std::string& host_line) {
    RawConnection c(s.server->port());
    c.Send("GET /api/job HTTP/1.1\r\n" + host_line + "Authorization: Bearer " + kToken + "\r\nConnection: close\r\n\r\n");
    return c.Read("\r\n\r\n");
  };
  for (const std::string& host : std::vector<std::string>{"127.0.0.1:" + port, "localhost:" + port, "LocalHost", "127.0.0.1:9000", "127.0.0.1"}) {
    CAPTURE(host);  // the port is not compared: a port-forward serves the page under another one
    CHECK(ask("Host: " + host + "\r\n").starts_with("HTTP/1.1 200"));
  }
  const std::string evil = ask("Host: evil.example:" + port + "\r\n");
  CHECK(evil.starts_with("HTTP/1.1 403"));
  CHECK(evil.ends_with("\r\n\r\nstatus page: Host 'evil.example:" + port +
                       "' is not this server (127.0.0.1 or localhost): a page that reaches it under another name is "
                       "refused (DNS rebinding); to open it under a name of this machine, start the job with "
                       "--status_host NAME\n"));
  CHECK(ask("Host: 127.0.0.2:" + port + "\r\n").starts_with("HTTP/1.1 403"));  // not the address it came in on
  const std::string none = ask("");
  CHECK(none.starts_with("HTTP/1.1 400"));
  CHECK(none.ends_with("status page: the request has no Host header (HTTP/1.1 requires one)\n"));

  // A --status_host name; and on a wildcard bind, the address the launcher printed (0.0.0.0) as well
  // as the one the connection came in on. (The test's traffic stays on loopback.)
  StatusServerOptions named = Options();
  named.access.host_names = {"node7.cluster"};
  named.bind_address = "0.0.0.0";
  Served n(named);
  for (const std::string& host : std::vector<std::string>{"Node7.Cluster:8080", "0.0.0.0:8080", "127.0.0.1:8080"}) {
    CAPTURE(host);
    RawConnection c(n.server->port());
    c.Send("GET /api/job HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + std::string(kToken) +
           "\r\nConnection: close\r\n\r\n");
    CHECK(c.Read("\r\n\r\n").starts_with("HTTP/1.1 200"));
  }
}

TEST_CASE("StatusServer answers a malformed request with 400 and a method it does not serve with 405") {
  Served s;
  const std::string auth = "Host: " + s.host() + "\r\nAuthorization: Bearer " + kToken + "\r\n";
  {
    RawConnection c(s.server->port());
    c.Send("GARBAGE\r\n\r\n");
    const std::string reply = c.Read("\r\n\r\n");
    CHECK(reply.starts_with("HTTP/1.1 400"));
  }
  {
    RawConnection c(s.server->port());
    c.Send("PUT /api/job HTTP/1.1\r\n" + auth + "Content-Length: 2\r\n\r\nhi");
    const std::string reply = c.Read("not allowed");
    CHECK(reply.starts_with("HTTP/1.1 405"));
    CHECK(reply.find("Allow: GET, HEAD") != std::string::npos);
  }
  {
    RawConnection c(s.server->port());
    c.Send("HEAD /metrics HTTP/1.1\r\n" + auth + "Connection: close\r\n\r\n");
    const std::string reply = c.Read("\r\n\r\n");
    CHECK(reply.starts_with("HTTP/1.1 200"));
    CHECK(reply.find("dslaunch_") == std::string::npos);  // no body
  }
  {
    RawConnection c(s.server->port());
    c.Send("GET / HTTP/1.1\r\n" + auth + "Content-Length: 100000\r\n\r\n");
    CHECK(c.Read("\r\n\r\n").starts_with("HTTP/1.1 400"));  // a body past the limit
  }
}

TEST_CASE("StatusServer keeps a connection alive across requests") {
  Served s;
  const std::string auth = "Host: " + s.host() + "\r\nAuthorization: Bearer " + kToken + "\r\n";
  RawConnection c(s.server->port());
  c.Send("GET /api/logs?rank=0 HTTP/1.1\r\n" + auth + "\r\n");
  CHECK(c.Read("hello from rank 0").find("hello from rank 0") != std::string::npos);
  c.Send("GET /nope HTTP/1.1\r\n" + auth + "\r\n");
  CHECK(c.Read("no such path").find("HTTP/1.1 404") != std::string::npos);
}

TEST_CASE("StatusServer pushes a new view to an event stream when the board changes") {
  Served s;
  RawConnection c(s.server->port());
  c.Send("GET /api/events?token=" + std::string(kToken) + " HTTP/1.1\r\nHost: " + s.host() + "\r\n\r\n");
  const std::string first = c.Read("\n\n", std::chrono::seconds(10));
  CHECK(first.starts_with("HTTP/1.1 200"));
  CHECK(first.find("Content-Type: text/event-stream") != std::string::npos);
  CHECK(first.find("data: " + JobViewJson(testing::SampleView()) + "\n\n") != std::string::npos);
  JobView changed = testing::SampleView();
  changed.state = "stopping";
  s.board->Publish(changed);
  const std::string next = c.Read("\n\n", std::chrono::seconds(10));
  CHECK(next == "data: " + JobViewJson(changed) + "\n\n");
}

// Slowloris: connections that send part of a request head and then nothing. The header deadline
// is set long here, so that only the pool's bounds can keep the page reachable.
StatusServerOptions PatientHeaders() {
  StatusServerOptions o = Options();
  o.limits.header_timeout = std::chrono::minutes(5);
  return o;
}

std::vector<std::unique_ptr<RawConnection>> Slowloris(uint16_t port, size_t n, const char* source) {
  std::vector<std::unique_ptr<RawConnection>> conns;
  for (size_t i = 0; i < n; ++i) {
    conns.push_back(std::make_unique<RawConnection>(port, source));
    conns.back()->Send("GET /api/job HTTP/1.1\r\nHost: 127.0.0.1\r\nX-a: ");
  }
  return conns;
}

size_t CountClosed(std::vector<std::unique_ptr<RawConnection>>& conns) {
  size_t n = 0;
  for (auto& c : conns) n += c->Closed() ? 1 : 0;
  return n;
}

TEST_CASE("70 slowloris connections from one address hold 16 places and do not stop another client's request") {
  Served s(PatientHeaders());
  auto slow = Slowloris(s.server->port(), 70, "127.0.0.2");
  // Each connection past the address's 16 took the place of that address's oldest waiting one.
  REQUIRE(WaitFor([&] { return CountClosed(slow) == 70 - kStatusMaxRequestConnectionsPerClient; }, kWait));
  CHECK(s.server->Load().requests == kStatusMaxRequestConnectionsPerClient);
  CHECK(!slow.back()->Closed());  // the newest are the ones kept
  CHECK(Get(s.server->port(), "/api/job", "127.0.0.3").starts_with("HTTP/1.1 200"));
}

TEST_CASE("Slowloris connections from many addresses, or from the page's own address, do not lock out the page") {
  Served s(PatientHeaders());
  std::vector<std::unique_ptr<RawConnection>> slow;
  const char* sources[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"};
  for (const char* source : sources) {
    auto some = Slowloris(s.server->port(), kStatusMaxRequestConnectionsPerClient, source);
    for (auto& c : some) slow.push_back(std::move(c));
  }
  // 80 from 5 addresses in a pool of 64: the 16 oldest gave way.
  REQUIRE(WaitFor([&] { return CountClosed(slow) == 80 - kStatusMaxRequestConnections; }, kWait));
  CHECK(s.server->Load().requests == kStatusMaxRequestConnections);
  CHECK(Get(s.server->port(), "/api/job", "127.0.0.1").starts_with("HTTP/1.1 200"));
  // Another user of the machine connects from 127.0.0.1 too, as the page's browser does.
  auto same = Slowloris(s.server->port(), 20, "127.0.0.1");
  REQUIRE(WaitFor([&] { return CountClosed(same) == 20 - kStatusMaxRequestConnectionsPerClient; }, kWait));
  CHECK(Get(s.server->port(), "/api/job", "127.0.0.1").starts_with("HTTP/1.1 200"));
}

TEST_CASE("Idle event streams have a pool of their own: 70 of them do not stop requests") {
  Served s;
  std::vector<std::unique_ptr<RawConnection>> streams;
  size_t streaming = 0;
  size_t refused = 0;
  std::string refusal;
  for (int i = 0; i < 70; ++i) {  // 8 each from 127.0.0.2, 127.0.0.3, ...
    const std::string source = "127.0.0." + std::to_string(2 + i / static_cast<int>(kStatusMaxEventStreamsPerClient));
    streams.push_back(std::make_unique<RawConnection>(s.server->port(), source.c_str()));
    streams.back()->Send("GET /api/events?token=" + std::string(kToken) + " HTTP/1.1\r\nHost: " + s.host() + "\r\n\r\n");
    const std::string reply = streams.back()->Read("\n\n");
    if (reply.starts_with("HTTP/1.1 200")) ++streaming;
    if (reply.starts_with("HTTP/1.1 503")) {
      ++refused;
      refusal = reply.substr(reply.find("\r\n\r\n") + 4);
    }
  }
  CHECK(streaming == kStatusMaxEventStreams);
  CHECK(refused == 70 - kStatusMaxEventStreams);
  CHECK(refusal == "status page: 32 event streams are open and busy already (the status server's limit); the page "
                   "polls /api/job instead\n");
  CHECK(s.server->Load().streams == kStatusMaxEventStreams);
  // The refused ones leave the request pool once closed; the streams were never in it.
  CHECK(WaitFor([&] { return s.server->Load().requests == 0; }, kWait));
  CHECK(Get(s.server->port(), "/api/job", "127.0.0.1").starts_with("HTTP/1.1 200"));
  // One address's own streams are bounded too.
  std::vector<std::unique_ptr<RawConnection>> mine;
  Served t;
  for (size_t i = 0; i <= kStatusMaxEventStreamsPerClient; ++i) {
    mine.push_back(std::make_unique<RawConnection>(t.server->port(), "127.0.0.9"));
    mine.back()->Send("GET /api/events?token=" + std::string(kToken) + " HTTP/1.1\r\nHost: " + t.host() + "\r\n\r\n");
  }
  const std::string over = mine.back()->Read("instead\n");
  CHECK(over.ends_with("status page: 8 event streams from 127.0.0.9 are open and busy already (the status server's "
                       "limit per client); the page polls /api/job instead\n"));
  // Streams that their clients close leave the pool at once (not at the next keep-alive, 15 s on).
  REQUIRE(WaitFor([&] { return t.server->Load().streams == kStatusMaxEventStreamsPerClient; }, kWait));
  mine.clear();
  CHECK(WaitFor([&] { return t.server->Load().streams == 0; }, std::chrono::seconds(5)));
}

TEST_CASE("StatusServer closes a client that does not send its request within the header deadline, and an idle one") {
  StatusServerOptions o = Options();
  o.limits.header_timeout = std::chrono::milliseconds(300);
  o.limits.idle_timeout = std::chrono::milliseconds(600);
  Served s(o);
  {
    // The deadline runs from the server's accept, which can come before the client's connect
    // returns: the bound is measured from before the connect (taken after it, a loaded machine
    // saw the close 300 ms after the accept but less than 300 ms after `start`).
    const auto start = std::chrono::steady_clock::now();
    RawConnection slow(s.server->port());
    slow.Send("GET /api/job HTTP/1.1\r\nHo");
    REQUIRE(WaitFor([&] { return slow.Closed(); }, kWait));
    CHECK(std::chrono::steady_clock::now() - start >= o.limits.header_timeout);
    CHECK(s.server->Load().requests == 0);
  }
  {
    RawConnection quiet(s.server->port());  // connects and sends nothing at all
    REQUIRE(WaitFor([&] { return quiet.Closed(); }, kWait));
  }
  {
    RawConnection kept(s.server->port());
    // The idle time runs from the server's reply, which is before the client has read it: the
    // bound is measured from before the request.
    const auto answered = std::chrono::steady_clock::now();
    kept.Send("GET /api/job HTTP/1.1\r\nHost: " + s.host() + "\r\nAuthorization: Bearer " + kToken + "\r\n\r\n");
    CHECK(kept.Read("\"job_id\"").starts_with("HTTP/1.1 200"));
    REQUIRE(WaitFor([&] { return kept.Closed(); }, kWait));  // kept alive, then idle past 600 ms
    CHECK(std::chrono::steady_clock::now() - answered >= o.limits.idle_timeout);
  }
}

TEST_CASE("StatusServer refuses an address that is not an IP, no token, and a port in use") {
  auto board = std::make_shared<JobBoard>();
  StatusServerOptions bad_address = Options();
  bad_address.bind_address = "localhost";
  auto bad = StatusServer::Start(bad_address, board);
  REQUIRE(!bad.ok());
  CHECK(bad.status().message() == "status server: 'localhost' is not an IP address");
  auto no_token = StatusServer::Start({}, board);
  REQUIRE(!no_token.ok());
  CHECK(no_token.status().message() == "status server: no token (StatusAccess::token is empty)");
  auto first = StatusServer::Start(Options(), board);
  REQUIRE(first.ok());
  StatusServerOptions same = Options();
  same.port = (*first)->port();
  auto second = StatusServer::Start(same, board);
  REQUIRE(!second.ok());
  CHECK(second.status().message().find("cannot listen on 127.0.0.1:" + std::to_string((*first)->port())) == 0);
}

TEST_CASE("StatusServer stops: the port closes and a streaming client sees the end") {
  Served s;
  const std::string url = s.server->Url();
  RawConnection c(s.server->port());
  c.Send("GET /api/events?token=" + std::string(kToken) + " HTTP/1.1\r\nHost: " + s.host() + "\r\n\r\n");
  c.Read("\n\n");
  s.server.reset();
  auto after = HttpGet(url, kToken, "/api/job", std::chrono::seconds(2));
  REQUIRE(!after.ok());
  CHECK(after.status().code() == StatusCode::kUnavailable);
  CHECK(c.Read("never", std::chrono::seconds(5)).empty());  // closed, not hanging
}

// The job ends and the launcher exits at once: the finished view is published a moment before
// the server stops, well inside the streams' poll interval.
TEST_CASE("StatusServer stops: an open event stream gets the board's last view, then its end") {
  Served s;
  RawConnection c(s.server->port());
  c.Send("GET /api/events?token=" + std::string(kToken) + " HTTP/1.1\r\nHost: " + s.host() + "\r\n\r\n");
  REQUIRE(c.Read("\n\n").find("data: ") != std::string::npos);
  JobView finished = testing::SampleView();
  finished.state = "finished";
  finished.exit_code = 0;
  finished.outcome = "succeeded";
  finished.ended_ms = finished.started_ms + 96000;
  s.board->Publish(finished);
  s.server.reset();
  const std::string rest = c.Read("never", std::chrono::seconds(10));
  CHECK(c.Closed());
  CHECK(rest == "data: " + JobViewJson(finished) + "\n\n");  // the last view, once, and the end
}

TEST_CASE("StatusServer stops: a stream that had the last view already gets only its end") {
  Served s;
  RawConnection c(s.server->port());
  c.Send("GET /api/events?token=" + std::string(kToken) + " HTTP/1.1\r\nHost: " + s.host() + "\r\n\r\n");
  REQUIRE(c.Read("\n\n").find("data: ") != std::string::npos);
  JobView finished = testing::SampleView();
  finished.state = "finished";
  s.board->Publish(finished);
  CHECK(c.Read("\n\n") == "data: " + JobViewJson(finished) + "\n\n");
  s.server.reset();
  CHECK(c.Read("never", std::chrono::seconds(10)).empty());
  CHECK(c.Closed());
}

TEST_CASE("StatusServer stops within the final flush timeout when a stream does not read") {
  StatusServerOptions options = Options();
  options.limits.final_flush_timeout = std::chrono::milliseconds(300);
  Served s(options);
  RawConnection c(s.server->port());
  c.Send("GET /api/events?token=" + std::string(kToken) + " HTTP/1.1\r\nHost: " + s.host() + "\r\n\r\n");
  REQUIRE(c.Read("\n\n").find("data: ") != std::string::npos);
  // A view too big for the socket buffers, which this client never reads.
  JobView huge = testing::SampleView();
  huge.command.assign(1, std::string(32 << 20, 'x'));
  s.board->Publish(huge);
  const auto start = std::chrono::steady_clock::now();
  s.server.reset();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(8));  // a bound, not a speed
}

}  // namespace
}  // namespace dslaunch::launcher
