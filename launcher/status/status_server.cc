#include "launcher/status/status_server.h"

#include "common/asio.h"  // first: Boost 1.74's Asio under C++20 (common/asio.h)

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <thread>

#include "launcher/status/job_view_json.h"
#include "launcher/status/status_routes.h"

namespace dslaunch::launcher {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// A client has this long to send a whole request (and to take each response): a stalled one
// must not hold a connection for ever.
constexpr std::chrono::seconds kRequestTimeout{30};
// The largest request accepted: GETs carry no body, so anything bigger is not a page's request.
constexpr uint64_t kMaxRequestBody = 4096;
// Connections served at once; more are answered 503 and closed, so a flood of clients costs the
// launcher's machine a bounded number of descriptors.
constexpr int kMaxConnections = 64;
// How often an event stream looks for a new view: the page shows changes within this, and an idle
// job costs one JSON rendering per stream per interval.
constexpr std::chrono::milliseconds kEventPollInterval{500};
// After a failed accept (out of descriptors), wait this long before the next, rather than spin.
constexpr std::chrono::milliseconds kAcceptRetryDelay{100};
// A comment line on a quiet event stream this often keeps proxies from closing it.
constexpr std::chrono::seconds kEventKeepAlive{15};

}  // namespace

class StatusServer::Impl {
 public:
  explicit Impl(std::shared_ptr<const JobBoard> board) : board_(std::move(board)), acceptor_(ioc_) {}

  Status Listen(const StatusServerOptions& options) {
    beast::error_code ec;
    const asio::ip::address address = asio::ip::make_address(options.bind_address, ec);
    if (ec) return InvalidArgumentError("status server: '" + options.bind_address + "' is not an IP address");
    const tcp::endpoint endpoint(address, options.port);
    const std::string where = options.bind_address + ":" + std::to_string(options.port);
    if (acceptor_.open(endpoint.protocol(), ec); ec) return InternalError("cannot open a socket for " + where + ": " + ec.message());
    acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (acceptor_.bind(endpoint, ec); ec) return UnavailableError("cannot listen on " + where + ": " + ec.message());
    if (acceptor_.listen(asio::socket_base::max_listen_connections, ec); ec) {
      return UnavailableError("cannot listen on " + where + ": " + ec.message());
    }
    port_ = acceptor_.local_endpoint().port();
    const std::string host = address.is_v6() ? "[" + options.bind_address + "]" : options.bind_address;
    url_ = "http://" + host + ":" + std::to_string(port_) + "/";
    Accept();
    thread_ = std::thread([this] { ioc_.run(); });
    return Status::Ok();
  }

  ~Impl() {
    asio::post(ioc_, [this] {
      beast::error_code ec;
      acceptor_.close(ec);
    });
    ioc_.stop();
    if (thread_.joinable()) thread_.join();
  }

  // The view as JSON for the event streams, rendered at most once per poll interval however many
  // streams are open (a long job's curves make it the server's largest piece of work).
  const std::string& EventJson() {
    const auto now = std::chrono::steady_clock::now();
    if (event_json_at_ == std::chrono::steady_clock::time_point() || now - event_json_at_ >= kEventPollInterval / 2) {
      event_json_ = JobViewJson(board_->View());
      event_json_at_ = now;
    }
    return event_json_;
  }

  uint16_t port() const { return port_; }
  const std::string& url() const { return url_; }
  const JobBoard& board() const { return *board_; }
  int& connections() { return connections_; }

 private:
  void Accept();

  std::shared_ptr<const JobBoard> board_;
  // Before ioc_: sessions still queued when the io_context is destroyed count themselves out.
  int connections_ = 0;  // touched on the server's thread only
  asio::io_context ioc_{1};
  tcp::acceptor acceptor_;
  asio::steady_timer accept_retry_{ioc_};
  std::thread thread_;
  uint16_t port_ = 0;
  std::string url_;
  std::string event_json_;  // EventJson's cache, on the server's thread only
  std::chrono::steady_clock::time_point event_json_at_;
};

namespace {

// One client connection: requests and replies in turn, until it closes, or one event stream.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, StatusServer::Impl& server) : stream_(std::move(socket)), server_(server), timer_(stream_.get_executor()) {
    ++server_.connections();
  }
  ~Session() { --server_.connections(); }

  void Read() {
    parser_.emplace();
    parser_->body_limit(kMaxRequestBody);
    stream_.expires_after(kRequestTimeout);
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->OnRead(ec);
    });
  }

  // Answers a connection over the limit and closes it.
  void Refuse() {
    StatusReply reply{503, "text/plain; charset=utf-8", "too many connections to the status server; try again\n", {}};
    Send(std::move(reply), false, false);
  }

 private:
  void OnRead(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted) {
      return Close();
    }
    if (ec) {
      return Send({400, "text/plain; charset=utf-8", "bad request: " + ec.message() + "\n", {}}, false, false);
    }
    const auto& request = parser_->get();
    const std::string method(request.method_string());
    const std::string target(request.target());
    if (IsEventStream(method, target)) return StartEvents();
    Send(Respond(method, target, server_.board()), request.keep_alive(), request.method() == http::verb::head);
  }

  void Send(StatusReply reply, bool keep_alive, bool head) {
    auto response = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(reply.status), 11);
    response->set(http::field::server, "dslaunch");
    response->set(http::field::content_type, reply.content_type);
    for (const auto& [name, value] : reply.headers) response->set(name, value);
    response->keep_alive(keep_alive);
    response->content_length(reply.body.size());
    if (!head) response->body() = std::move(reply.body);
    stream_.expires_after(kRequestTimeout);
    http::async_write(stream_, *response, [self = shared_from_this(), response, keep_alive](beast::error_code ec, size_t) {
      if (ec || !keep_alive) return self->Close();
      self->Read();
    });
  }

  void StartEvents() {
    stream_.expires_never();
    last_sent_ = std::chrono::steady_clock::now();
    Write(std::make_shared<std::string>(
        "HTTP/1.1 200 OK\r\nServer: dslaunch\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
        "Connection: close\r\n\r\n"));
  }

  // Writes `bytes`, then waits for the next poll.
  void Write(std::shared_ptr<std::string> bytes) {
    asio::async_write(stream_.socket(), asio::buffer(*bytes), [self = shared_from_this(), bytes](beast::error_code ec, size_t) {
      if (ec) return self->Close();
      self->last_sent_ = std::chrono::steady_clock::now();
      self->Poll();
    });
  }

  void Poll() {
    const std::string& json = server_.EventJson();
    if (json != last_json_) {
      last_json_ = json;
      return Write(std::make_shared<std::string>(EventFrame(json)));
    }
    if (std::chrono::steady_clock::now() - last_sent_ >= kEventKeepAlive) {
      return Write(std::make_shared<std::string>(": keep-alive\n\n"));
    }
    timer_.expires_after(kEventPollInterval);
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->Poll();
    });
  }

  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  StatusServer::Impl& server_;
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string last_json_;
  std::chrono::steady_clock::time_point last_sent_;
};

}  // namespace

void StatusServer::Impl::Accept() {
  acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) {
      accept_retry_.expires_after(kAcceptRetryDelay);
      accept_retry_.async_wait([this](beast::error_code wait_ec) {
        if (!wait_ec) Accept();
      });
      return;
    }
    auto session = std::make_shared<Session>(std::move(socket), *this);
    if (connections_ > kMaxConnections) {
      session->Refuse();
    } else {
      session->Read();
    }
    Accept();
  });
}

Result<std::unique_ptr<StatusServer>> StatusServer::Start(const StatusServerOptions& options,
                                                          std::shared_ptr<const JobBoard> board) {
  auto impl = std::make_unique<Impl>(std::move(board));
  DSLAUNCH_RETURN_IF_ERROR(impl->Listen(options));
  return std::unique_ptr<StatusServer>(new StatusServer(std::move(impl)));
}

StatusServer::StatusServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StatusServer::~StatusServer() = default;
uint16_t StatusServer::port() const { return impl_->port(); }
std::string StatusServer::Url() const { return impl_->url(); }

}  // namespace dslaunch::launcher
