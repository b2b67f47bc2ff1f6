#include "launcher/status/status_server.h"

#include "common/asio.h"  // first: Boost 1.74's Asio under C++20 (common/asio.h)

#include <array>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <thread>
#include <unordered_map>

#include "launcher/status/job_view_json.h"
#include "launcher/status/status_routes.h"

namespace dslaunch::launcher {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// The largest request accepted: GETs carry no body, so anything bigger is not a page's request.
constexpr uint64_t kMaxRequestBody = 4096;
// The largest request head: a browser's GET with its usual headers is 1-2 KiB.
constexpr uint32_t kMaxRequestHead = 8192;
// Bytes a kept-alive connection's first read of its next request takes at most (the rest of the
// request is read by the HTTP parser).
constexpr size_t kFirstReadBytes = 4096;
// How often an event stream looks for a new view: the page shows changes within this, and an idle
// job costs one JSON rendering per stream per interval.
constexpr std::chrono::milliseconds kEventPollInterval{500};
// After a failed accept (out of descriptors), wait this long before the next, rather than spin.
constexpr std::chrono::milliseconds kAcceptRetryDelay{100};
// A comment line on a quiet event stream this often keeps proxies from closing it.
constexpr std::chrono::seconds kEventKeepAlive{15};

class Session;

std::string_view View(beast::string_view s) { return {s.data(), s.size()}; }

// `access` with the bound address among the names a Host may carry: a wildcard bind prints
// http://0.0.0.0:PORT/, and a client that opens that URL sends Host 0.0.0.0:PORT (an address
// literal, which no rebinding page can send).
StatusAccess WithBoundAddress(StatusAccess access, const std::string& bind_address) {
  access.host_names.push_back(bind_address);
  return access;
}

}  // namespace

class StatusServer::Impl {
 public:
  Impl(const StatusServerOptions& options, std::shared_ptr<const JobBoard> board)
      : board_(std::move(board)),
        access_(WithBoundAddress(options.access, options.bind_address)),
        limits_(options.limits),
        requests_(options.limits.requests),
        streams_(options.limits.streams),
        acceptor_(ioc_) {}

  Status Listen(const StatusServerOptions& options) {
    if (access_.token.empty()) return InvalidArgumentError("status server: no token (StatusAccess::token is empty)");
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
    if (thread_.joinable()) {
      asio::post(ioc_, [this] {
        beast::error_code ec;
        acceptor_.close(ec);
        FinishStreams();
      });
      std::unique_lock<std::mutex> lock(flush_mu_);
      flush_cv_.wait_for(lock, limits_.final_flush_timeout, [this] { return flush_started_ && flushing_ == 0; });
    }
    ioc_.stop();
    if (thread_.joinable()) thread_.join();
  }

  // On the server's thread, as it stops: every open stream gets the last view and is closed;
  // each calls StreamFinished once done.
  void FinishStreams();
  void StreamFinished() {
    std::lock_guard<std::mutex> lock(flush_mu_);
    if (flushing_ > 0) --flushing_;
    flush_cv_.notify_all();
  }
  // The board's view as JSON now, uncached: the last view a stream gets.
  std::string CurrentJson() const { return JobViewJson(board_->View()); }

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

  // Sessions keep the pools' counts in the load tests read.
  void PublishLoad() {
    load_requests_ = requests_.total();
    load_streams_ = streams_.total();
  }
  StatusServerLoad Load() const { return {load_requests_.load(), load_streams_.load()}; }

  void Register(ConnectionId id, std::weak_ptr<Session> session) { sessions_[id] = std::move(session); }
  void Unregister(ConnectionId id) { sessions_.erase(id); }
  void RegisterStream(ConnectionId id, std::weak_ptr<Session> session) { stream_sessions_[id] = std::move(session); }
  void UnregisterStream(ConnectionId id) { stream_sessions_.erase(id); }
  // Closes the session the request pool evicted (ConnectionPool::Admit).
  void Evict(ConnectionId id);

  uint16_t port() const { return port_; }
  const std::string& url() const { return url_; }
  const JobBoard& board() const { return *board_; }
  const StatusAccess& access() const { return access_; }
  const StatusServerLimits& limits() const { return limits_; }
  ConnectionPool& requests() { return requests_; }
  ConnectionPool& streams() { return streams_; }

 private:
  void Accept();

  std::shared_ptr<const JobBoard> board_;
  const StatusAccess access_;
  const StatusServerLimits limits_;
  // Before ioc_: sessions still queued when the io_context is destroyed count themselves out of
  // these. Touched on the server's thread only.
  ConnectionPool requests_;
  ConnectionPool streams_;
  std::unordered_map<ConnectionId, std::weak_ptr<Session>> sessions_;  // the request pool's, to evict
  std::unordered_map<ConnectionId, std::weak_ptr<Session>> stream_sessions_;  // the stream pool's, to finish
  // The final flush (~Impl): streams still to send their last view; guarded by flush_mu_.
  std::mutex flush_mu_;
  std::condition_variable flush_cv_;
  size_t flushing_ = 0;
  bool flush_started_ = false;
  std::atomic<size_t> load_requests_{0};
  std::atomic<size_t> load_streams_{0};
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
// It belongs to the request pool while it waits for or is answered a request, to the stream
// pool once it streams events, and to neither when it was refused (it gets 503 and is closed).
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, StatusServer::Impl& server, std::string client, std::string local)
      : stream_(std::move(socket)), server_(server), timer_(stream_.get_executor()), client_(std::move(client)),
        local_address_(std::move(local)) {}

  ~Session() {
    if (request_id_) {
      server_.requests().Release(*request_id_);
      server_.Unregister(*request_id_);
    }
    if (stream_id_) {
      server_.streams().Release(*stream_id_);
      server_.UnregisterStream(*stream_id_);
    }
    if (finishing_ && !finished_) server_.StreamFinished();  // gone before its last view was written
    server_.PublishLoad();
  }

  // The server stops: the last view if this stream has not had it, then the end of the stream.
  void Finish() {
    finishing_ = true;
    timer_.cancel();
    if (!writing_) SendFinal();
  }

  const std::string& client() const { return client_; }

  // Serves the connection as `id` of the request pool.
  void Start(ConnectionId id) {
    request_id_ = id;
    server_.Register(id, weak_from_this());
    ReadRequest(true);
  }

  // Answers a connection the pool refused, and closes it.
  void Refuse(const std::string& why) {
    Send({503, "text/plain; charset=utf-8", "status page: " + why + "; try again\n", {{"Retry-After", "1"}}}, false, false);
  }

  // The pool gave this connection's place to a newer one (it waited for a request).
  void Evict() { Close(); }

 private:
  // Waits for the next request: a new connection gets the header deadline from its start, a
  // kept-alive one the idle deadline until its next request begins, then the header deadline.
  void ReadRequest(bool first) {
    server_.requests().SetIdle(*request_id_, true);
    parser_.emplace();
    parser_->body_limit(kMaxRequestBody);
    parser_->header_limit(kMaxRequestHead);
    if (first || buffer_.size() > 0) return ReadHead();
    stream_.expires_after(server_.limits().idle_timeout);
    stream_.async_read_some(buffer_.prepare(kFirstReadBytes), [self = shared_from_this()](beast::error_code ec, size_t n) {
      if (ec) return self->Close();
      self->buffer_.commit(n);
      self->ReadHead();
    });
  }

  void ReadHead() {
    stream_.expires_after(server_.limits().header_timeout);
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->OnRead(ec);
    });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted) {
      return Close();
    }
    if (ec) {
      return Send({400, "text/plain; charset=utf-8", "bad request: " + ec.message() + "\n", {}}, false, false);
    }
    server_.requests().SetIdle(*request_id_, false);
    const auto& request = parser_->get();
    const std::string method(request.method_string());
    RequestHead head{method, View(request.target()), std::nullopt, View(request[http::field::authorization])};
    if (auto host = request.find(http::field::host); host != request.end()) head.host = View(host->value());
    const AccessDecision access = CheckAccess(server_.access(), head, local_address_);
    const bool is_head = request.method() == http::verb::head;
    if (access.refusal) return Send(*access.refusal, request.keep_alive(), is_head);
    if (IsEventStream(method, access.target)) return StartEvents();
    Send(Respond(method, access.target, server_.board()), request.keep_alive(), is_head);
  }

  void Send(StatusReply reply, bool keep_alive, bool head) {
    auto response = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(reply.status), 11);
    response->set(http::field::server, "dslaunch");
    response->set(http::field::content_type, reply.content_type);
    for (const auto& [name, value] : reply.headers) response->set(name, value);
    response->keep_alive(keep_alive);
    response->content_length(reply.body.size());
    if (!head) response->body() = std::move(reply.body);
    stream_.expires_after(server_.limits().write_timeout);
    http::async_write(stream_, *response, [self = shared_from_this(), response, keep_alive](beast::error_code ec, size_t) {
      if (ec || !keep_alive) return self->Close();
      self->ReadRequest(false);
    });
  }

  // Moves the connection from the request pool to the stream pool, or refuses the stream (503)
  // when that pool has no room for it.
  void StartEvents() {
    const PoolAdmission admission = server_.streams().Admit(client_);
    if (admission.kind != PoolAdmission::Kind::kAdmitted) {
      return Send({503, "text/plain; charset=utf-8",
                   "status page: " + DescribeRefusal(admission.kind, server_.limits().streams, client_, "event streams") +
                       "; the page polls /api/job instead\n",
                   {{"Cache-Control", "no-store"}}},
                  false, false);
    }
    stream_id_ = admission.id;
    server_.RegisterStream(*stream_id_, weak_from_this());
    server_.streams().SetIdle(*stream_id_, false);  // a stream is never evicted: a full pool refuses
    server_.requests().Release(*request_id_);  // a stream does not count against the request pool
    server_.Unregister(*request_id_);
    request_id_.reset();
    server_.PublishLoad();
    last_sent_ = std::chrono::steady_clock::now();
    WatchForClose();
    Write(std::make_shared<std::string>(
        "HTTP/1.1 200 OK\r\nServer: dslaunch\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
        "Connection: close\r\n\r\n"));
  }

  // Writes `bytes` within the write deadline, then waits for the next poll.
  void Write(std::shared_ptr<std::string> bytes) {
    stream_.expires_after(server_.limits().write_timeout);
    writing_ = true;
    asio::async_write(stream_, asio::buffer(*bytes), [self = shared_from_this(), bytes](beast::error_code ec, size_t) {
      self->writing_ = false;
      if (ec) {
        self->Close();
        return self->Done();
      }
      self->last_sent_ = std::chrono::steady_clock::now();
      self->Poll();
    });
  }

  // The last event of a stopping server: the view now, unless it is what this stream has.
  void SendFinal() {
    if (final_started_) return;
    final_started_ = true;
    std::string json = server_.CurrentJson();
    if (json == last_json_) {
      Close();
      return Done();
    }
    last_json_ = std::move(json);
    auto bytes = std::make_shared<std::string>(EventFrame(last_json_));
    stream_.expires_after(server_.limits().write_timeout);
    asio::async_write(stream_, asio::buffer(*bytes), [self = shared_from_this(), bytes](beast::error_code, size_t) {
      self->Close();
      self->Done();
    });
  }

  // Tells a stopping server this stream is done (once).
  void Done() {
    if (!finishing_ || finished_) return;
    finished_ = true;
    server_.StreamFinished();
  }

  // Reads (and drops) what a streaming client sends, to see at once when it goes: its place in
  // the stream pool is free then, not only at the next event or keep-alive written.
  void WatchForClose() {
    stream_.socket().async_read_some(asio::buffer(discard_), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->Close();
      self->WatchForClose();
    });
  }

  void Poll() {
    if (finishing_) return SendFinal();
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
    timer_.cancel();
  }

  beast::tcp_stream stream_;
  StatusServer::Impl& server_;
  asio::steady_timer timer_;
  const std::string client_;         // the source address, the pools' client
  const std::string local_address_;  // the address the connection arrived on, for the Host check
  std::optional<ConnectionId> request_id_;
  std::optional<ConnectionId> stream_id_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string last_json_;
  std::chrono::steady_clock::time_point last_sent_;
  // The server's stop (Finish): an event being written finishes first, then the last view goes.
  bool writing_ = false;
  bool finishing_ = false;
  bool final_started_ = false;
  bool finished_ = false;
  std::array<char, 512> discard_;  // WatchForClose's buffer
};

}  // namespace

void StatusServer::Impl::FinishStreams() {
  std::vector<std::shared_ptr<Session>> open;
  for (auto& [id, weak] : stream_sessions_) {
    if (auto session = weak.lock()) open.push_back(std::move(session));
  }
  {
    std::lock_guard<std::mutex> lock(flush_mu_);
    flushing_ = open.size();
    flush_started_ = true;
  }
  flush_cv_.notify_all();
  for (auto& session : open) session->Finish();
}

void StatusServer::Impl::Evict(ConnectionId id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  std::shared_ptr<Session> session = it->second.lock();
  sessions_.erase(it);
  if (session) session->Evict();
}

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
    beast::error_code peer_ec, local_ec;
    const tcp::endpoint peer = socket.remote_endpoint(peer_ec);
    const tcp::endpoint local = socket.local_endpoint(local_ec);
    if (peer_ec || local_ec) return Accept();  // closed by the client already: the socket goes with it
    auto session = std::make_shared<Session>(std::move(socket), *this, peer.address().to_string(),
                                             local.address().to_string());
    const PoolAdmission admission = requests_.Admit(session->client());
    if (admission.kind == PoolAdmission::Kind::kAdmitted) {
      if (admission.evicted) Evict(*admission.evicted);
      session->Start(admission.id);
    } else {
      session->Refuse(DescribeRefusal(admission.kind, limits_.requests, session->client(), "connections"));
    }
    PublishLoad();
    Accept();
  });
}

Result<std::unique_ptr<StatusServer>> StatusServer::Start(const StatusServerOptions& options,
                                                          std::shared_ptr<const JobBoard> board) {
  auto impl = std::make_unique<Impl>(options, std::move(board));
  DSLAUNCH_RETURN_IF_ERROR(impl->Listen(options));
  return std::unique_ptr<StatusServer>(new StatusServer(std::move(impl)));
}

StatusServer::StatusServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StatusServer::~StatusServer() = default;
uint16_t StatusServer::port() const { return impl_->port(); }
std::string StatusServer::Url() const { return impl_->url(); }
StatusServerLoad StatusServer::Load() const { return impl_->Load(); }

}  // namespace dslaunch::launcher
