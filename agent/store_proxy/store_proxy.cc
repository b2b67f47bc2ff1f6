#include "agent/store_proxy/store_proxy.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <deque>
#include <map>
#include <unordered_map>
#include <variant>

#include "agent/store_proxy/framed_stream.h"
#include "agent/store_proxy/request_combiner.h"
#include "common/asio.h"
#include "common/auth/handshake.h"
#include "common/auth/secret.h"
#include "common/endpoint/endpoint.h"
#include "common/endpoint/endpoint_client.h"
#include "common/message_types.h"
#include "common/store/proxy_protocol.h"
#include "common/store/store_service.h"
#include "common/wire.h"

namespace dslaunch::agent {
namespace {

using Clock = std::chrono::steady_clock;
using boost::system::error_code;
using unix_socket = asio::local::stream_protocol;

}  // namespace

class LocalConnection;

class StoreProxy::Impl : public std::enable_shared_from_this<StoreProxy::Impl> {
 public:
  Impl(asio::io_context& io, StoreProxyOptions options)
      : io_(io), acceptor_(io), deadline_timer_(io), options_(std::move(options)) {}

  Status Open();
  void Accept();
  void BeginGeneration(int generation);
  void EndGeneration();
  void Stop();

  // From the local connections.
  void Submit(const std::shared_ptr<LocalConnection>& from, StoreRequest request);
  void Remove(LocalConnection* c) { locals_.erase(c); }
  // The handshake's view of this node: the current generation, and whether it is over here.
  int generation() const { return generation_; }
  bool generation_over() const { return generation_over_; }
  const StoreProxyOptions& options() const { return options_; }

  // From the control connection.
  void OnReply(std::string_view payload);

  uint64_t local_requests_ = 0;
  RequestCombiner combiner_;

 private:
  void CloseLocals();
  void ScheduleFlush();
  void Flush();

  asio::io_context& io_;
  unix_socket::acceptor acceptor_;
  asio::steady_timer deadline_timer_;
  StoreProxyOptions options_;
  int generation_ = -1;  // none begun yet
  bool generation_over_ = false;
  bool flush_posted_ = false;
  bool stopped_ = false;
  uint64_t first_tag_ = 1;  // of the current generation: replies to lower tags are late, dropped
  std::map<LocalConnection*, std::shared_ptr<LocalConnection>> locals_;
  std::unordered_map<LocalId, std::weak_ptr<LocalConnection>> waiting_;  // submitted, unanswered
  LocalId next_local_id_ = 1;
};

// One worker's connection: the endpoint's handshake, then store requests answered in order.
class LocalConnection : public std::enable_shared_from_this<LocalConnection> {
 public:
  LocalConnection(StoreProxy::Impl* proxy, unix_socket::socket socket, asio::io_context& io)
      : proxy_(proxy), stream_(std::move(socket)), handshake_timer_(io) {}

  void Start() {
    challenge_.server_nonce = RandomBytes(kNonceBytes);
    auto self = shared_from_this();
    stream_.Send(self, msg::kChallenge, EncodeChallenge(challenge_));
    handshake_timer_.expires_after(kHandshakeTimeout);
    handshake_timer_.async_wait([self](const boost::system::error_code& ec) {
      if (!ec && !self->authenticated_) self->Close();
    });
    stream_.Read(self);
  }

  void OnFrame(wire::Frame frame) {
    Status st = authenticated_ ? OnRequest(std::move(frame)) : OnAuth(frame);
    if (!st.ok()) Close();
  }

  void OnStreamError(const Status&) { Close(); }

  // The answer of the request in the proxy; the next queued one goes in.
  void Answer(uint8_t type, const std::string& payload) {
    busy_ = false;
    stream_.Send(shared_from_this(), type, payload);
    while (!busy_ && !queued_.empty() && !stream_.closed()) {
      StoreRequest next = std::move(queued_.front());
      queued_.pop_front();
      Execute(std::move(next));
    }
  }

  // Closes without flushing: a worker blocked in a call sees the connection break (kUnavailable).
  void Close() {
    if (stream_.closed()) return;
    stream_.Close();
    handshake_timer_.cancel();
    proxy_->Remove(this);
  }

 private:
  Status OnAuth(const wire::Frame& frame) {
    if (frame.type != msg::kAuth) return InvalidArgumentError("expected AUTH");
    const StoreProxyOptions& o = proxy_->options();
    auto checked = CheckAuth(challenge_, frame.payload, o.job_id, o.secret, proxy_->generation());
    std::optional<AuthRejection> rejection;
    if (auto* r = std::get_if<AuthRejection>(&checked)) rejection = std::move(*r);
    const AuthRequest* auth = std::get_if<AuthRequest>(&checked);
    if (!rejection && auth->role != PeerRole::kStoreClient) {
      rejection = AuthRejection{AuthRejectReason::kUnknownRole,
                                "a node's store proxy serves store clients only, not " +
                                    PeerRoleName(auth->role)};
    } else if (!rejection && proxy_->generation_over()) {
      rejection = AuthRejection{
          AuthRejectReason::kStaleGeneration,
          "generation " + std::to_string(auth->generation) + " of job '" + o.job_id +
              "' is over on this node"};
    }
    auto self = shared_from_this();
    if (rejection) {
      stream_.Send(self, msg::kAuthRejected, EncodeAuthRejected(*rejection));
      stream_.CloseAfterFlush();
      handshake_timer_.cancel();
      proxy_->Remove(this);
      return Status::Ok();
    }
    generation_ = auth->generation;
    authenticated_ = true;
    handshake_timer_.cancel();
    stream_.Send(self, msg::kAuthOk, EncodeAuthOk(ServerProof(o.secret, challenge_, *auth)));
    return Status::Ok();
  }

  Status OnRequest(wire::Frame frame) {
    DSLAUNCH_ASSIGN_OR_RETURN(StoreRequest request, DecodeStoreRequest(frame));
    if (!busy_) {
      Execute(std::move(request));
    } else if (queued_.size() < kMaxQueuedStoreRequests) {
      queued_.push_back(std::move(request));
    } else {
      return FailedPreconditionError("too many requests queued");
    }
    return Status::Ok();
  }

  void Execute(StoreRequest r) {
    ++proxy_->local_requests_;
    if (Status st = CheckGenerationKeys(r, generation_); !st.ok()) {
      stream_.Send(shared_from_this(), msg::kStoreError, EncodeStoreError(st));
      return;
    }
    busy_ = true;
    proxy_->Submit(shared_from_this(), std::move(r));
  }

  StoreProxy::Impl* proxy_;
  FramedStream<unix_socket::socket> stream_;
  asio::steady_timer handshake_timer_;
  Challenge challenge_;
  bool authenticated_ = false;
  int generation_ = 0;
  bool busy_ = false;  // a request of this connection is in the proxy
  std::deque<StoreRequest> queued_;
};

Status StoreProxy::Impl::Open() {
  const std::string& path = options_.socket_path;
  if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path)) {
    return InvalidArgumentError("the store proxy's socket path " + path + " is " +
                                std::to_string(path.size()) + " bytes, over the " +
                                std::to_string(sizeof(sockaddr_un::sun_path) - 1) +
                                " a Unix socket allows");
  }
  error_code ec;
  ::unlink(path.c_str());  // a socket file left by an earlier agent of this pid
  acceptor_.open(unix_socket(), ec);
  if (!ec) ::fcntl(acceptor_.native_handle(), F_SETFD, FD_CLOEXEC);
  if (!ec) acceptor_.bind(unix_socket::endpoint(path), ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return UnavailableError("store proxy: listen on " + path + ": " + ec.message());
  return Status::Ok();
}

void StoreProxy::Impl::Accept() {
  acceptor_.async_accept([self = shared_from_this()](const error_code& ec, unix_socket::socket s) {
    if (self->stopped_ || ec == asio::error::operation_aborted) return;
    if (!ec) {
      ::fcntl(s.native_handle(), F_SETFD, FD_CLOEXEC);
      if (self->locals_.size() >= kMaxLocalStoreConnections) {
        error_code ignored;
        s.close(ignored);
      } else {
        auto c = std::make_shared<LocalConnection>(self.get(), std::move(s), self->io_);
        self->locals_.emplace(c.get(), c);
        c->Start();
      }
    }
    self->Accept();
  });
}

void StoreProxy::Impl::BeginGeneration(int generation) {
  EndGeneration();
  generation_ = generation;
  generation_over_ = false;
  first_tag_ = combiner_.next_tag();
}

// Nothing of the generation may reach the wire after this: the agent sends AGENT_DONE next, and
// the launcher answers any later PROXIED of it with kAborted.
void StoreProxy::Impl::EndGeneration() {
  generation_over_ = true;
  deadline_timer_.cancel();
  combiner_.FailAll(UnavailableError("generation " + std::to_string(generation_) + " is over on this node"));
  waiting_.clear();
  CloseLocals();
}

void StoreProxy::Impl::Submit(const std::shared_ptr<LocalConnection>& from, StoreRequest request) {
  const LocalId id = next_local_id_++;
  waiting_.emplace(id, from);
  combiner_.Submit(id, std::move(request), Clock::now());
  ScheduleFlush();
}

// Once per turn of the event loop: what arrived in this turn combines.
void StoreProxy::Impl::ScheduleFlush() {
  if (flush_posted_) return;
  flush_posted_ = true;
  asio::post(io_, [self = shared_from_this()] {
    self->flush_posted_ = false;
    self->Flush();
  });
}

void StoreProxy::Impl::Flush() {
  if (stopped_ || generation_over_) return;
  for (const UpstreamRequest& r : combiner_.TakeSends(Clock::now())) {
    options_.send_upstream(EncodeProxiedRequest(r.tag, r.request));
  }
  std::optional<Clock::time_point> next = combiner_.NextDeadline();
  if (!next) return;
  deadline_timer_.expires_at(*next);
  deadline_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    if (!ec) self->Flush();
  });
}

void StoreProxy::Impl::OnReply(std::string_view payload) {
  if (stopped_) return;
  auto reply = DecodeProxiedReply(payload);
  if (reply.ok() && (generation_over_ || reply->tag < first_tag_)) return;  // its request was failed
  auto answers = reply.ok() ? combiner_.OnReply(*reply, Clock::now()) : reply.status();
  if (!answers.ok()) {
    options_.log("store proxy: a broken reply from the launcher: " + answers.status().ToString() +
                 "; generation " + std::to_string(generation_) + " is over on this node");
    EndGeneration();
    return;
  }
  for (const LocalAnswer& a : *answers) {
    auto it = waiting_.find(a.id);
    if (it == waiting_.end()) continue;
    std::shared_ptr<LocalConnection> c = it->second.lock();
    waiting_.erase(it);
    if (c) c->Answer(a.type, a.payload);
  }
  ScheduleFlush();
}

void StoreProxy::Impl::CloseLocals() {
  std::vector<std::shared_ptr<LocalConnection>> all;
  for (auto& [ptr, c] : locals_) all.push_back(c);
  for (auto& c : all) c->Close();
  locals_.clear();
}

void StoreProxy::Impl::Stop() {
  if (stopped_) return;
  stopped_ = true;
  error_code ignored;
  acceptor_.close(ignored);
  deadline_timer_.cancel();
  ::unlink(options_.socket_path.c_str());
  CloseLocals();
}

StoreProxy::StoreProxy(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

StoreProxy::~StoreProxy() { impl_->Stop(); }

Result<std::unique_ptr<StoreProxy>> StoreProxy::Listen(asio::io_context& io, StoreProxyOptions options) {
  if (!options.log) options.log = [](std::string_view) {};
  auto impl = std::make_shared<Impl>(io, std::move(options));
  DSLAUNCH_RETURN_IF_ERROR(impl->Open());
  impl->Accept();
  return std::unique_ptr<StoreProxy>(new StoreProxy(std::move(impl)));
}

void StoreProxy::BeginGeneration(int generation) { impl_->BeginGeneration(generation); }

void StoreProxy::EndGeneration() { impl_->EndGeneration(); }

void StoreProxy::OnUpstreamReply(std::string_view payload) { impl_->OnReply(payload); }

std::string StoreProxy::address() const {
  return std::string(kUnixAddressPrefix) + impl_->options().socket_path;
}

uint64_t StoreProxy::local_requests() const { return impl_->local_requests_; }

uint64_t StoreProxy::upstream_requests() const { return impl_->combiner_.upstream_requests(); }

}  // namespace dslaunch::agent
