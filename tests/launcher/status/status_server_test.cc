// The status server over real TCP on 127.0.0.1, with a board the test fills: what a browser and a
// Prometheus scraper get, bad requests, the event stream, and the server's end.
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

namespace dslaunch::launcher {
namespace {

struct Served {
  std::shared_ptr<JobBoard> board = std::make_shared<JobBoard>();
  std::unique_ptr<StatusServer> server;
  Served() {
    board->Publish(testing::SampleView());
    board->AppendLog(0, "hello from rank 0");
    auto s = StatusServer::Start({}, board);
    REQUIRE(s.ok());
    server = std::move(*s);
  }
};

// A raw connection: what a client that is not a browser may send.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  }
  ~RawConnection() { ::close(fd_); }
  void Send(const std::string& bytes) { REQUIRE(::write(fd_, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size())); }
  // Reads until `until` appears, the peer closes, or `timeout` passes.
  std::string Read(const std::string& until, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::string got;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (got.find(until) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fd_, buf, sizeof(buf));
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    return got;
  }

 private:
  int fd_;
};

TEST_CASE("StatusServer serves the page, the job, the metrics and log tails over TCP") {
  Served s;
  CHECK(s.server->Url() == "http://127.0.0.1:" + std::to_string(s.server->port()) + "/");
  auto page = HttpGet(s.server->Url(), "/");
  REQUIRE(page.ok());
  CHECK(page->status == 200);
  CHECK(page->body.find("<table id=\"ranks\">") != std::string::npos);
  auto job = HttpGet(s.server->Url(), "/api/job");
  REQUIRE(job.ok());
  CHECK(nlohmann::json::parse(job->body)["job_id"] == testing::SampleView().job_id);
  auto metrics = HttpGet(s.server->Url(), "/metrics");
  REQUIRE(metrics.ok());
  CHECK(metrics->body.find("dslaunch_ranks{state=\"failed\"} 1\n") != std::string::npos);
  auto logs = HttpGet(s.server->Url(), "/api/logs?rank=0&lines=5");
  REQUIRE(logs.ok());
  CHECK(logs->body == "hello from rank 0\n");
  auto missing = HttpGet(s.server->Url(), "/api/logs?rank=7");
  REQUIRE(missing.ok());
  CHECK(missing->status == 404);
}

TEST_CASE("StatusServer answers a malformed request with 400 and a method it does not serve with 405") {
  Served s;
  {
    RawConnection c(s.server->port());
    c.Send("GARBAGE\r\n\r\n");
    const std::string reply = c.Read("\r\n\r\n");
    CHECK(reply.starts_with("HTTP/1.1 400"));
  }
  {
    RawConnection c(s.server->port());
    c.Send("PUT /api/job HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi");
    const std::string reply = c.Read("not allowed");
    CHECK(reply.starts_with("HTTP/1.1 405"));
    CHECK(reply.find("Allow: GET, HEAD") != std::string::npos);
  }
  {
    RawConnection c(s.server->port());
    c.Send("HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    const std::string reply = c.Read("\r\n\r\n");
    CHECK(reply.starts_with("HTTP/1.1 200"));
    CHECK(reply.find("dslaunch_") == std::string::npos);  // no body
  }
  {
    RawConnection c(s.server->port());
    c.Send("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n");
    CHECK(c.Read("\r\n\r\n").starts_with("HTTP/1.1 400"));  // a body past the limit
  }
}

TEST_CASE("StatusServer keeps a connection alive across requests") {
  Served s;
  RawConnection c(s.server->port());
  c.Send("GET /api/logs?rank=0 HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(c.Read("hello from rank 0").find("hello from rank 0") != std::string::npos);
  c.Send("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(c.Read("no such path").find("HTTP/1.1 404") != std::string::npos);
}

TEST_CASE("StatusServer pushes a new view to an event stream when the board changes") {
  Served s;
  RawConnection c(s.server->port());
  c.Send("GET /api/events HTTP/1.1\r\nHost: x\r\n\r\n");
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

TEST_CASE("StatusServer refuses an address that is not an IP and a port in use") {
  auto board = std::make_shared<JobBoard>();
  auto bad = StatusServer::Start({"localhost", 0}, board);
  REQUIRE(!bad.ok());
  CHECK(bad.status().message() == "status server: 'localhost' is not an IP address");
  auto first = StatusServer::Start({}, board);
  REQUIRE(first.ok());
  auto second = StatusServer::Start({"127.0.0.1", (*first)->port()}, board);
  REQUIRE(!second.ok());
  CHECK(second.status().message().find("cannot listen on 127.0.0.1:" + std::to_string((*first)->port())) == 0);
}

TEST_CASE("StatusServer stops: the port closes and a streaming client sees the end") {
  Served s;
  const std::string url = s.server->Url();
  RawConnection c(s.server->port());
  c.Send("GET /api/events HTTP/1.1\r\nHost: x\r\n\r\n");
  c.Read("\n\n");
  s.server.reset();
  auto after = HttpGet(url, "/api/job", std::chrono::seconds(2));
  REQUIRE(!after.ok());
  CHECK(after.status().code() == StatusCode::kUnavailable);
  CHECK(c.Read("never", std::chrono::seconds(5)).empty());  // closed, not hanging
}

}  // namespace
}  // namespace dslaunch::launcher
