// Proc tests of the endpoint: authentication, routing by role, and that bad input closes only the
// offending connection.
#include "common/endpoint/endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <thread>

#include <doctest/doctest.h>

#include "common/endpoint/endpoint_client.h"
#include "common/message_types.h"
#include "tests/support/reserved_port.h"
#include "tests/support/skip.h"
#include "tests/support/test_endpoint.h"

namespace dslaunch {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;
using testing::kTestJobId;
using testing::kTestSecret;
using testing::TestEndpoint;

Clock::time_point In(milliseconds d) { return Clock::now() + d; }

// A plain TCP connection to the endpoint, no handshake.
UniqueFd RawConnect(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(fd.valid());
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  return fd;
}

void SendRaw(int fd, std::string_view bytes) {
  REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(bytes.size()));
}

// True if the server closes `fd` within `limit` (reads and discards anything it sends first).
bool ClosedByServerWithin(int fd, milliseconds limit) {
  auto deadline = Clock::now() + limit;
  char buf[4096];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    int left =
        static_cast<int>(std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count());
    if (::poll(&p, 1, std::max(left, 1)) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;  // EOF or reset
  }
  return false;
}

// Reads the CHALLENGE the server sends on connect.
void ExpectChallenge(int fd, wire::FrameDecoder& decoder) {
  auto f = ReceiveFrame(fd, decoder, In(milliseconds(5000)));
  REQUIRE(f.ok());
  CHECK(f->type == msg::kChallenge);
}

void CheckStoreStillWorks(TestEndpoint& ep) {
  auto c = ep.Client();
  CHECK(c->Set("still", "alive").ok());
  CHECK(*c->Get("still", milliseconds(0)) == "alive");
}

TEST_CASE("A wrong secret is rejected with kUnauthenticated and the secret is never logged") {
  TestEndpoint ep;
  auto fd = ConnectToEndpoint(ep.address(), kTestJobId, "not-the-secret", PeerRole::kStoreClient, 0,
                              In(milliseconds(5000)));
  CHECK(fd.status().code() == StatusCode::kUnauthenticated);
  CHECK(fd.status().message().find("not-the-secret") == std::string::npos);
  auto store =
      StoreClient::Connect({ep.address(), kTestJobId, 0, "not-the-secret"}, In(milliseconds(5000)));
  CHECK(store.status().code() == StatusCode::kUnauthenticated);
  CHECK(ep.Stop());
  CHECK(ep.LogContains("wrong secret"));
  for (const auto& line : ep.Log()) {
    CHECK(line.find(kTestSecret) == std::string::npos);
    CHECK(line.find("not-the-secret") == std::string::npos);
  }
}

TEST_CASE("A client of another job is rejected with kUnauthenticated") {
  TestEndpoint ep;
  auto fd = ConnectToEndpoint(ep.address(), "other-job", kTestSecret, PeerRole::kStoreClient, 0,
                              In(milliseconds(5000)));
  CHECK(fd.status().code() == StatusCode::kUnauthenticated);
  CHECK(fd.status().message().find("other-job") != std::string::npos);
  CheckStoreStillWorks(ep);
}

TEST_CASE("A store client of a generation that is over is refused with kAborted, not retried") {
  TestEndpoint ep;
  ep.OnIo([&] { ep.endpoint().BeginGeneration(2); });
  const auto start = Clock::now();
  // A retry would go on until this deadline; the rejection must end the attempt at once.
  const auto deadline = In(milliseconds(20000));
  auto fd =
      ConnectToEndpoint(ep.address(), kTestJobId, kTestSecret, PeerRole::kStoreClient, 1, deadline);
  CHECK(Clock::now() - start < milliseconds(10000));
  CHECK(fd.status().code() == StatusCode::kAborted);
  CHECK(fd.status().message().find(
            "endpoint rejected the connection: generation 1 of job 'test-job' is over (the job "
            "is at generation 2)") != std::string::npos);
  auto store = StoreClient::Connect(ep.Config(1), deadline);
  CHECK(store.status().code() == StatusCode::kAborted);
  // The current generation still gets in.
  auto current = ep.Client(2);
  CHECK(current->Set("k", "v").ok());
  CHECK(ep.Stop());
  CHECK(ep.LogContains("generation 1 of job 'test-job' is over"));
}

TEST_CASE("A store client of a generation that has not started is refused") {
  TestEndpoint ep;  // at generation 0
  auto fd = ConnectToEndpoint(ep.address(), kTestJobId, kTestSecret, PeerRole::kStoreClient, 5,
                              In(milliseconds(20000)));
  CHECK(fd.status().code() == StatusCode::kFailedPrecondition);
  CHECK(fd.status().message().find(
            "generation 5 of job 'test-job' has not started (the job is at generation 0)") !=
        std::string::npos);
  ep.OnIo([&] { ep.endpoint().BeginGeneration(5); });
  CHECK(ep.OnIo([&] { return ep.endpoint().generation(); }) == 5);
  CHECK(ep.Client(5)->Set("k", "v").ok());
}

TEST_CASE("A garbage frame closes only that connection") {
  TestEndpoint ep;
  auto good = ep.Client();
  REQUIRE(good->Set("before", "1").ok());
  SUBCASE("zero length before authentication") {
    UniqueFd raw = RawConnect(ep.port());
    wire::FrameDecoder d;
    ExpectChallenge(raw.get(), d);
    SendRaw(raw.get(), std::string(8, '\0'));
    CHECK(ClosedByServerWithin(raw.get(), milliseconds(2000)));
  }
  SUBCASE("an oversized length") {
    UniqueFd raw = RawConnect(ep.port());
    SendRaw(raw.get(), "\x7f\xff\xff\xff\x10garbage");
    CHECK(ClosedByServerWithin(raw.get(), milliseconds(2000)));
  }
  SUBCASE("a store request before authentication") {
    UniqueFd raw = RawConnect(ep.port());
    REQUIRE(SendFrame(raw.get(), msg::kStoreSet, wire::ByteWriter().String("k").String("v").Take())
                .ok());
    CHECK(ClosedByServerWithin(raw.get(), milliseconds(2000)));
  }
  SUBCASE("more than kMaxHandshakeBytes of a large frame before authentication") {
    UniqueFd raw = RawConnect(ep.port());
    // Announces a 1 MiB AUTH but sends only part of it: the server must not wait for the rest.
    std::string part =
        wire::EncodeFrame(msg::kAuth, std::string(1 << 20, 'x')).substr(0, 2 * kMaxHandshakeBytes);
    SendRaw(raw.get(), part);
    CHECK(ClosedByServerWithin(raw.get(), milliseconds(2000)));
  }
  SUBCASE("a malformed store request after authentication") {
    auto fd = ConnectToEndpoint(ep.address(), kTestJobId, kTestSecret, PeerRole::kStoreClient, 0,
                                In(milliseconds(5000)));
    REQUIRE(fd.ok());
    REQUIRE(SendFrame(fd->get(), msg::kStoreSet, "junk").ok());
    CHECK(ClosedByServerWithin(fd->get(), milliseconds(2000)));
  }
  SUBCASE("an unknown message type after authentication") {
    auto fd = ConnectToEndpoint(ep.address(), kTestJobId, kTestSecret, PeerRole::kStoreClient, 0,
                                In(milliseconds(5000)));
    REQUIRE(fd.ok());
    REQUIRE(SendFrame(fd->get(), 200, "").ok());
    CHECK(ClosedByServerWithin(fd->get(), milliseconds(2000)));
  }
  CHECK(*good->Get("before", milliseconds(0)) == "1");
  CheckStoreStillWorks(ep);
  CHECK(ep.Stop());
}

TEST_CASE("A handshake that stalls is closed after the handshake timeout") {
  EndpointOptions options;
  options.handshake_timeout = milliseconds(200);
  TestEndpoint ep(options);
  UniqueFd raw = RawConnect(ep.port());
  auto start = Clock::now();
  CHECK(ClosedByServerWithin(raw.get(), milliseconds(3000)));
  CHECK(Clock::now() - start >= milliseconds(150));
  CHECK(ep.LogContains("handshake not completed"));
  CheckStoreStillWorks(ep);
}

constexpr uint8_t kWelcome = msg::kFirstAgentMessage + 10;

// Greets at once (so the greeting travels right behind AUTH_OK), then echoes each frame back
// with type + 1; "close" makes it reply then Close(), "fail" makes it return an error.
class EchoSession : public SessionHandler {
 public:
  EchoSession(std::shared_ptr<EndpointConnection> conn, std::vector<Status>* closes)
      : conn_(std::move(conn)), closes_(closes) {
    conn_->Send(kWelcome, "welcome");
  }
  Status OnFrame(wire::Frame frame) override {
    if (frame.payload == "fail") return InvalidArgumentError("told to fail");
    conn_->Send(frame.type + 1, frame.payload);
    if (frame.payload == "close") conn_->Close();
    return Status::Ok();
  }
  void OnClose(const Status& why) override { closes_->push_back(why); }

 private:
  std::shared_ptr<EndpointConnection> conn_;
  std::vector<Status>* closes_;
};

TEST_CASE("Agent connections are routed to the session factory registered for the role") {
  TestEndpoint ep;
  std::vector<Status> closes;  // touched on the io thread only
  ep.OnIo([&] {
    ep.endpoint().SetSessionFactory(
        PeerRole::kAgent, [&](std::shared_ptr<EndpointConnection> conn) {
          CHECK(conn->role() == PeerRole::kAgent);
          CHECK(conn->peer().rfind("127.0.0.1:", 0) == 0);
          return std::make_unique<EchoSession>(std::move(conn), &closes);
        });
    return 0;
  });
  auto connect = [&] {
    auto fd = ConnectToEndpoint(ep.address(), kTestJobId, kTestSecret, PeerRole::kAgent, 0,
                                In(milliseconds(5000)));
    REQUIRE(fd.ok());
    return std::move(fd).value();
  };
  {
    UniqueFd fd = connect();
    wire::FrameDecoder d;
    // The greeting sent right behind AUTH_OK was not swallowed by the handshake.
    auto f = ReceiveFrame(fd.get(), d, In(milliseconds(5000)));
    REQUIRE(f.ok());
    CHECK(f->type == kWelcome);
    CHECK(f->payload == "welcome");
    REQUIRE(SendFrame(fd.get(), msg::kFirstAgentMessage, "hi").ok());
    f = ReceiveFrame(fd.get(), d, In(milliseconds(5000)));
    REQUIRE(f.ok());
    CHECK(f->type == msg::kFirstAgentMessage + 1);
    CHECK(f->payload == "hi");
    REQUIRE(SendFrame(fd.get(), msg::kFirstAgentMessage, "close").ok());
    f = ReceiveFrame(fd.get(), d, In(milliseconds(5000)));  // flushed before the close
    REQUIRE(f.ok());
    CHECK(f->payload == "close");
    CHECK(ReceiveFrame(fd.get(), d, In(milliseconds(5000))).status().code() ==
          StatusCode::kUnavailable);
  }
  {
    UniqueFd fd = connect();
    REQUIRE(SendFrame(fd.get(), msg::kFirstAgentMessage, "fail").ok());
    CHECK(ClosedByServerWithin(fd.get(), milliseconds(2000)));
  }
  {
    UniqueFd fd = connect();
    fd.Reset();  // the agent hangs up
  }
  auto deadline = In(milliseconds(3000));
  while (ep.OnIo([&] { return closes.size(); }) < 3 && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  CHECK(ep.Stop());
  REQUIRE(closes.size() == 3);
  CHECK(closes[0].ok());
  CHECK(closes[1].code() == StatusCode::kInvalidArgument);
  CHECK(closes[2].code() == StatusCode::kUnavailable);
}

// On its first frame: queues a large frame and a last one behind it, closes the connection, and
// stops the whole endpoint at once, as the launcher does when the job ends (RELEASE, then Stop).
class LastWordSession : public SessionHandler {
 public:
  LastWordSession(std::shared_ptr<EndpointConnection> conn, Endpoint* endpoint)
      : conn_(std::move(conn)), endpoint_(endpoint) {}
  Status OnFrame(wire::Frame) override {
    conn_->Send(kWelcome, std::string(8u << 20, 'x'));  // more than a socket buffer takes at once
    conn_->Send(kWelcome, "last");
    conn_->Close();
    endpoint_->Stop();
    return Status::Ok();
  }
  void OnClose(const Status&) override {}

 private:
  std::shared_ptr<EndpointConnection> conn_;
  Endpoint* endpoint_;
};

TEST_CASE("Stop lets a connection closed with Close() finish writing its last frames") {
  TestEndpoint ep;
  ep.OnIo([&] {
    ep.endpoint().SetSessionFactory(PeerRole::kAgent, [&](std::shared_ptr<EndpointConnection> conn) {
      return std::make_unique<LastWordSession>(std::move(conn), &ep.endpoint());
    });
    return 0;
  });
  auto fd = ConnectToEndpoint(ep.address(), kTestJobId, kTestSecret, PeerRole::kAgent, 0, In(milliseconds(5000)));
  REQUIRE(fd.ok());
  REQUIRE(SendFrame(fd->get(), msg::kFirstAgentMessage, "done").ok());
  wire::FrameDecoder d;
  auto big = ReceiveFrame(fd->get(), d, In(milliseconds(10000)));
  REQUIRE(big.ok());
  CHECK(big->payload.size() == (8u << 20));
  auto last = ReceiveFrame(fd->get(), d, In(milliseconds(10000)));
  REQUIRE(last.ok());
  CHECK(last->payload == "last");
  CHECK(ReceiveFrame(fd->get(), d, In(milliseconds(5000))).status().code() == StatusCode::kUnavailable);
}

TEST_CASE("Agents are not fenced by the generation; connections know the generation they gave") {
  TestEndpoint ep;
  std::vector<Status> closes;    // touched on the io thread only
  std::vector<int> generations;  // likewise
  ep.OnIo([&] {
    ep.endpoint().SetSessionFactory(
        PeerRole::kAgent, [&](std::shared_ptr<EndpointConnection> conn) {
          generations.push_back(conn->generation());
          return std::make_unique<EchoSession>(std::move(conn), &closes);
        });
  });
  auto connect = [&](int generation) {
    auto fd = ConnectToEndpoint(ep.address(), kTestJobId, kTestSecret, PeerRole::kAgent, generation,
                                In(milliseconds(5000)));
    REQUIRE_MESSAGE(fd.ok(), fd.status().ToString());
    return std::move(fd).value();
  };
  auto echo = [&](int fd, wire::FrameDecoder& d, const std::string& text) {
    REQUIRE(SendFrame(fd, msg::kFirstAgentMessage, text).ok());
    auto f = ReceiveFrame(fd, d, In(milliseconds(5000)));
    REQUIRE_MESSAGE(f.ok(), f.status().ToString());
    CHECK(f->payload == text);
  };
  UniqueFd before = connect(0);
  wire::FrameDecoder before_decoder;
  REQUIRE(ReceiveFrame(before.get(), before_decoder, In(milliseconds(5000))).ok());  // welcome
  ep.OnIo([&] { ep.endpoint().BeginGeneration(3); });
  // The agent connected at generation 0 stays open, and agents of any generation still get in.
  echo(before.get(), before_decoder, "still here");
  for (int generation : {0, 7}) {
    UniqueFd fd = connect(generation);
    wire::FrameDecoder d;
    REQUIRE(ReceiveFrame(fd.get(), d, In(milliseconds(5000))).ok());  // welcome
    echo(fd.get(), d, "hello");
  }
  CHECK(ep.Stop());
  CHECK(generations == std::vector<int>{0, 0, 7});
}

TEST_CASE("A role with no session factory is refused with kFailedPrecondition") {
  TestEndpoint ep;
  auto fd = ConnectToEndpoint(ep.address(), kTestJobId, kTestSecret, PeerRole::kAgent, 0,
                              In(milliseconds(5000)));
  CHECK(fd.status().code() == StatusCode::kFailedPrecondition);
  CHECK(fd.status().message().find("agent") != std::string::npos);
}

// A socket listening on `port` of 127.0.0.1 (beside a ReservedPort, with SO_REUSEADDR).
UniqueFd ListenOn(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int one = 1;
  REQUIRE(::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(::listen(fd.get(), 4) == 0);
  return fd;
}

TEST_CASE("ConnectToEndpoint retries until the endpoint starts listening") {
  testing::ReservedPort reserved;
  const std::string address = "127.0.0.1:" + std::to_string(reserved.port());
  // A stand-in takes the client's first connection and closes it before any challenge, so the
  // client has certainly tried and failed once before the endpoint exists.
  UniqueFd stand_in = ListenOn(reserved.port());
  auto connected = std::async(std::launch::async, [&] {
    return ConnectToEndpoint(address, kTestJobId, kTestSecret, PeerRole::kStoreClient, 0,
                             In(milliseconds(10000)));
  });
  pollfd p{stand_in.get(), POLLIN, 0};
  REQUIRE(::poll(&p, 1, 10000) == 1);
  UniqueFd first(::accept(stand_in.get(), nullptr, nullptr));
  REQUIRE(first.valid());
  first.Reset();
  stand_in.Reset();  // from here connections are refused until the endpoint listens
  EndpointOptions options;
  options.port = reserved.port();
  TestEndpoint ep(options);
  auto fd = connected.get();
  CHECK_MESSAGE(fd.ok(), fd.status().ToString());
}

TEST_CASE("ConnectToEndpoint gives up at the deadline with kDeadlineExceeded") {
  testing::ReservedPort reserved;  // bound, never listening: every attempt is refused
  std::string address = "127.0.0.1:" + std::to_string(reserved.port());
  auto start = Clock::now();
  auto fd = ConnectToEndpoint(address, kTestJobId, kTestSecret, PeerRole::kStoreClient, 0,
                              In(milliseconds(300)));
  CHECK(fd.status().code() == StatusCode::kDeadlineExceeded);
  CHECK(fd.status().message().find(address) != std::string::npos);
  CHECK(fd.status().message().find("Connection refused") != std::string::npos);
  CHECK(Clock::now() - start < seconds(3));
}

TEST_CASE("A store proxy socket that closes a connection before the challenge is named as a gone proxy") {
  // The moment an agent dies: its socket still takes a connection, then drops it unanswered.
  const std::string path = "/tmp/dslaunch-endpoint-test-" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(listener.valid());
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  path.copy(addr.sun_path, path.size());
  REQUIRE(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(::listen(listener.get(), 4) == 0);
  std::thread closer([&] {
    UniqueFd accepted(::accept(listener.get(), nullptr, nullptr));
  });
  auto fd = ConnectToEndpoint("unix:" + path, kTestJobId, kTestSecret, PeerRole::kStoreClient, 0, In(seconds(5)));
  closer.join();
  ::unlink(path.c_str());
  CHECK(fd.status().code() == StatusCode::kUnavailable);
  CHECK_MESSAGE(fd.status().message().find("the node's store proxy at " + path +
                                           " is gone (its dslaunch-agent exited or was killed)") != std::string::npos,
                fd.status().message());
}

TEST_CASE("Endpoint::Listen refuses an empty secret or job id and a bad address") {
  asio::io_context io;
  EndpointOptions options;
  options.job_id = "j";
  CHECK(Endpoint::Listen(io, options).status().code() == StatusCode::kInvalidArgument);
  options.secret = "s";
  options.job_id = "";
  CHECK(Endpoint::Listen(io, options).status().code() == StatusCode::kInvalidArgument);
  options.job_id = "j";
  options.bind_address = "no-such-host.invalid";
  CHECK(Endpoint::Listen(io, options).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("The endpoint serves IPv6 clients when the host has IPv6 loopback") {
  EndpointOptions options;
  options.bind_address = "::1";
  options.job_id = kTestJobId;
  options.secret = kTestSecret;
  std::string no_ipv6;
  {
    asio::io_context probe;
    auto listening = Endpoint::Listen(probe, options);
    if (!listening.ok()) no_ipv6 = listening.status().ToString();
  }
  DSLAUNCH_SKIP_UNLESS(no_ipv6.empty(), "ipv6", "no IPv6 loopback here: " + no_ipv6);
  TestEndpoint ep(options);
  auto c = StoreClient::Connect({"[::1]:" + std::to_string(ep.port()), kTestJobId, 0, kTestSecret},
                                In(milliseconds(5000)));
  REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  CHECK((*c)->Set("v6", "yes").ok());
}

}  // namespace
}  // namespace dslaunch
