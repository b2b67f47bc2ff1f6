#include "common/endpoint/endpoint.h"

#include <fcntl.h>

#include <array>
#include <cstdio>
#include <deque>
#include <iostream>
#include <map>

#include "common/asio.h"
#include "common/auth/secret.h"
#include "common/check.h"
#include "common/message_types.h"

namespace dslaunch {
namespace {

using tcp = asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

// Bytes read from a socket per read call, into the endpoint's one buffer: one syscall takes a
// burst of small store requests.
constexpr size_t kReadChunkBytes = 16u << 10;
// A send buffer larger than this is freed once written, not kept for the next message.
constexpr size_t kKeptSendBufferBytes = 512;
// After EMFILE and friends, accepting again at once would spin: wait this long first.
constexpr std::chrono::milliseconds kAcceptRetryDelay{100};

std::string FormatPeer(const tcp::endpoint& ep) {
  const asio::ip::address& a = ep.address();
  std::string host = a.to_string();
  if (a.is_v6()) host = "[" + host + "]";
  return host + ":" + std::to_string(ep.port());
}

void DefaultLog(std::string_view line) { std::cerr << "dslaunch endpoint: " << line << std::endl; }

}  // namespace

class Connection;

class Endpoint::Impl : public std::enable_shared_from_this<Endpoint::Impl> {
 public:
  Impl(asio::io_context& io, EndpointOptions options)
      : io_(io),
        acceptor_(io),
        retry_timer_(io),
        report_timer_(io),
        options_(std::move(options)),
        admission_(options_.handshake_limits),
        refusals_(options_.refusal_report_interval) {
    if (!options_.log) options_.log = DefaultLog;
  }

  Status Open();
  void StartAccept();
  void StopNow();
  void BeginGenerationNow(int generation);
  void Remove(Connection* c);
  void Log(std::string_view line) const { options_.log(line); }

  // Closes a just-accepted socket at once (with a reset, so a flood leaves no TIME_WAIT behind)
  // and counts the refusal.
  void Refuse(tcp::socket& socket, const std::string& address, std::string_view reason);
  // Counts a refused or failed unauthenticated connection; logs the line RefusalReport says to.
  void RecordRefusal(const std::string& address, std::string_view reason);
  void RecordAcceptError(const error_code& ec);
  // Queues a handshake step (see kHandshakeStepsPerTurn).
  void DeferHandshakeStep(std::function<void()> step);

  asio::io_context& io_;
  tcp::acceptor acceptor_;
  asio::steady_timer retry_timer_;
  asio::steady_timer report_timer_;
  EndpointOptions options_;
  uint16_t port_ = 0;
  bool stopped_ = false;
  int generation_ = 0;
  uint64_t bytes_sent_ = 0;  // written to every connection so far (Endpoint::bytes_sent)
  std::array<char, kReadChunkBytes> read_buffer_;  // every connection reads into it in turn
  std::map<PeerRole, SessionFactory> factories_;
  std::map<Connection*, std::shared_ptr<Connection>> connections_;
  HandshakeAdmission admission_;

 private:
  void RunHandshakeSteps();
  void ScheduleReport();
  void Report(bool final);

  RefusalReport refusals_;
  bool report_scheduled_ = false;
  // Accept failures (out of descriptors, mostly): the first is logged, the rest are counted
  // and reported with the refusals.
  uint64_t accept_errors_ = 0;
  std::optional<Clock::time_point> accept_errors_since_;
  std::string latest_accept_error_;
  std::deque<std::function<void()>> handshake_steps_;
  bool steps_posted_ = false;
};

class Connection : public EndpointConnection, public std::enable_shared_from_this<Connection> {
 public:
  // `address` is the peer's IP address, admitted by the endpoint's HandshakeAdmission; the
  // connection releases it when it authenticates or closes.
  Connection(std::shared_ptr<Endpoint::Impl> endpoint, tcp::socket socket, std::string peer,
             std::string address)
      : endpoint_(std::move(endpoint)),
        socket_(std::move(socket)),
        timer_(endpoint_->io_),
        peer_(std::move(peer)),
        address_(std::move(address)) {}

  // Starts the handshake deadline, which runs from the accept.
  void ArmHandshakeDeadline() {
    auto timeout = endpoint_->options_.handshake_timeout;
    timer_.expires_after(timeout);
    timer_.async_wait([self = shared_from_this(), timeout](const error_code& ec) {
      if (!ec && self->state_ == State::kHandshake) {
        self->Abort(DeadlineExceededError("handshake not completed within " +
                                          std::to_string(timeout.count()) + " ms"));
      }
    });
  }

  // Sends the CHALLENGE and starts reading (a handshake step).
  void Start() {
    if (state_ != State::kHandshake) return;
    error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);  // requests are small and latency-bound
    socket_.non_blocking(true, ec);               // OnReadable reads what is there, never waits
    challenge_.server_nonce = RandomBytes(kNonceBytes);
    Send(msg::kChallenge, EncodeChallenge(challenge_));
    if (state_ == State::kHandshake) StartRead();
  }

  void Send(uint8_t type, std::string payload) override {
    if (state_ == State::kClosing || state_ == State::kClosed) return;
    if (payload.size() + 1 > wire::kMaxFrameBytes) {
      Abort(InternalError("frame of " + std::to_string(payload.size()) + " bytes (type " +
                          std::to_string(type) + ") exceeds the frame limit"));
      return;
    }
    wire::AppendFrame(type, payload, pending_);
    if (pending_.size() > kMaxQueuedSendBytes) {
      Abort(UnavailableError("peer is not reading: more than " +
                             std::to_string(kMaxQueuedSendBytes) + " bytes queued"));
      return;
    }
    if (!writing_) StartWrite();
  }

  void Close() override {
    if (state_ == State::kClosing || state_ == State::kClosed) return;
    state_ = State::kClosing;
    close_reason_ = Status::Ok();
    if (!writing_) {
      ScheduleFinish();
      return;
    }
    timer_.expires_after(kCloseFlushTimeout);
    timer_.async_wait([self = shared_from_this()](const error_code& ec) {
      if (!ec) self->Finish();
    });
  }

  const std::string& peer() const override { return peer_; }
  PeerRole role() const override { return role_; }
  int generation() const override { return generation_; }
  // Authenticated and not closing.
  bool open() const { return state_ == State::kOpen; }
  // Close() was called and its frames are still being written (for at most kCloseFlushTimeout).
  bool flushing() const { return state_ == State::kClosing && close_reason_.ok() && !finish_scheduled_; }

  // Closes without flushing; the handler's OnClose sees `why`. Never re-enters the handler.
  void Abort(Status why) {
    if (state_ == State::kClosed || finish_scheduled_) return;
    if (state_ != State::kClosing || close_reason_.ok()) close_reason_ = std::move(why);
    state_ = State::kClosing;
    ScheduleFinish();
  }

 private:
  enum class State { kHandshake, kOpen, kClosing, kClosed };

  // Waits until the socket is readable, then reads into the endpoint's one read buffer (all
  // connections run on one thread, so one buffer serves them all: a connection holds no read
  // buffer of its own, only its decoder's unfinished frame). After a read that filled the buffer
  // the socket may hold more, which no new readiness event would announce (the reactor is
  // edge-triggered): the next read is then posted instead of waited for, and a read that finds
  // nothing goes back to waiting.
  void StartRead() {
    if (buffer_filled_) {
      asio::post(endpoint_->io_, [self = shared_from_this()] { self->OnReadable(error_code()); });
      return;
    }
    socket_.async_wait(tcp::socket::wait_read,
                       [self = shared_from_this()](const error_code& ec) { self->OnReadable(ec); });
  }

  void OnReadable(error_code ec) {
    if (state_ == State::kClosing || state_ == State::kClosed) return;
    size_t n = 0;
    if (!ec) {
      n = socket_.read_some(asio::buffer(endpoint_->read_buffer_), ec);
      buffer_filled_ = !ec && n == endpoint_->read_buffer_.size();
      if (ec == asio::error::would_block || ec == asio::error::try_again) {
        StartRead();  // woken without data (it was read already): wait again
        return;
      }
    }
    if (ec) {
      if (ec == asio::error::eof) {
        log_close_ = false;  // a peer hanging up is normal: workers exit
        Abort(UnavailableError("peer " + peer_ + " closed the connection"));
      } else {
        Abort(UnavailableError("read from " + peer_ + ": " + ec.message()));
      }
      return;
    }
    decoder_.Feed(endpoint_->read_buffer_.data(), n);
    if (state_ == State::kHandshake) {
      // Authenticated work first; the next read starts only after the step ran.
      endpoint_->DeferHandshakeStep([self = shared_from_this()] { self->Process(); });
      return;
    }
    Process();
  }

  void Process() {
    if (state_ == State::kClosing || state_ == State::kClosed) return;
    while (state_ == State::kHandshake || state_ == State::kOpen) {
      if (state_ == State::kHandshake && decoder_.buffered() > kMaxHandshakeBytes) {
        Abort(InvalidArgumentError("more than " + std::to_string(kMaxHandshakeBytes) +
                                   " bytes before authentication"));
        return;
      }
      auto next = decoder_.Next();
      if (!next.ok()) {
        Abort(next.status());
        return;
      }
      if (!next->has_value()) break;
      wire::Frame frame = std::move(**next);
      Status st =
          state_ == State::kHandshake ? HandleAuth(frame) : handler_->OnFrame(std::move(frame));
      if (!st.ok()) Abort(std::move(st));
    }
    if (state_ == State::kHandshake || state_ == State::kOpen) StartRead();
  }

  Status HandleAuth(const wire::Frame& frame) {
    if (frame.type != msg::kAuth) {
      return InvalidArgumentError("expected AUTH, got message type " + std::to_string(frame.type));
    }
    auto checked = CheckAuth(challenge_, frame.payload, endpoint_->options_.job_id,
                             endpoint_->options_.secret, endpoint_->generation_);
    const AuthRequest* auth = std::get_if<AuthRequest>(&checked);
    std::optional<AuthRejection> rejection;
    if (auth == nullptr) rejection = std::get<AuthRejection>(std::move(checked));
    const SessionFactory* factory = nullptr;
    if (!rejection) {
      auto it = endpoint_->factories_.find(auth->role);
      if (it == endpoint_->factories_.end() || !it->second) {
        rejection = AuthRejection{AuthRejectReason::kUnknownRole,
                                  "no service for role " + PeerRoleName(auth->role)};
      } else {
        factory = &it->second;
      }
    }
    if (rejection) {
      Send(msg::kAuthRejected, EncodeAuthRejected(*rejection));
      Close();  // flush the rejection, then close
      close_reason_ = UnauthenticatedError(rejection->message);
      return Status::Ok();
    }
    role_ = auth->role;
    generation_ = auth->generation;
    Send(msg::kAuthOk, EncodeAuthOk(ServerProof(endpoint_->options_.secret, challenge_, *auth)));
    state_ = State::kOpen;
    timer_.cancel();
    LeaveHandshakeSlot();
    handler_ = (*factory)(shared_from_this());
    if (!handler_) return FailedPreconditionError("session factory declined the connection");
    return Status::Ok();
  }

  void StartWrite() {
    writing_ = true;
    in_flight_.swap(pending_);
    pending_.clear();
    asio::async_write(
        socket_, asio::buffer(in_flight_),
        [self = shared_from_this()](const error_code& ec, size_t) { self->OnWrite(ec); });
  }

  void OnWrite(const error_code& ec) {
    writing_ = false;
    if (!ec) endpoint_->bytes_sent_ += in_flight_.size();
    in_flight_.clear();
    // A large message (an ASSIGNMENT, a burst of replies) must not keep its buffer for the
    // connection's life: at 100k connections that is most of the launcher's memory.
    if (in_flight_.capacity() > kKeptSendBufferBytes) std::string().swap(in_flight_);
    if (state_ == State::kClosed) return;
    if (ec) {
      Abort(UnavailableError("write to " + peer_ + ": " + ec.message()));
      return;
    }
    if (!pending_.empty() && !finish_scheduled_) {
      StartWrite();
    } else if (state_ == State::kClosing && pending_.empty()) {
      Finish();
    }
  }

  void ScheduleFinish() {
    if (finish_scheduled_) return;
    finish_scheduled_ = true;
    asio::post(endpoint_->io_, [self = shared_from_this()] { self->Finish(); });
  }

  // Closes the socket and tells the handler. Runs from the event loop only, never from inside a
  // handler call, so the handler may be destroyed here.
  void Finish() {
    if (state_ == State::kClosed) return;
    bool was_authenticated = handler_ != nullptr;
    state_ = State::kClosed;
    LeaveHandshakeSlot();
    // Log before closing, so that whoever sees the close can already see why. Closes caused by
    // Stop() (kAborted) are the owner's decision and not logged. A connection that never
    // authenticated is counted in the refusal report instead of a line each.
    if (!close_reason_.ok() && close_reason_.code() != StatusCode::kAborted && log_close_) {
      if (was_authenticated) {
        endpoint_->Log("connection from " + peer_ + " (" + PeerRoleName(role_) +
                       ") closed: " + close_reason_.ToString());
      } else {
        endpoint_->RecordRefusal(address_, close_reason_.ToString());
      }
    }
    error_code ignored;
    timer_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    std::unique_ptr<SessionHandler> handler = std::move(handler_);
    if (handler) handler->OnClose(close_reason_);
    handler.reset();  // drops the handler's reference to this connection
    endpoint_->Remove(this);
  }

  void LeaveHandshakeSlot() {
    if (!in_handshake_slot_) return;
    in_handshake_slot_ = false;
    endpoint_->admission_.Release(address_);
  }

  std::shared_ptr<Endpoint::Impl> endpoint_;
  tcp::socket socket_;
  asio::steady_timer timer_;  // handshake deadline, then the close-flush deadline
  std::string peer_;
  std::string address_;            // the peer's IP address, the key of HandshakeAdmission
  bool in_handshake_slot_ = true;  // counted by HandshakeAdmission
  State state_ = State::kHandshake;
  PeerRole role_ = PeerRole::kStoreClient;
  int generation_ = 0;
  Challenge challenge_;
  wire::FrameDecoder decoder_;
  std::string pending_;    // frames queued while a write is in flight
  std::string in_flight_;  // the buffer being written
  bool writing_ = false;
  bool finish_scheduled_ = false;
  bool log_close_ = true;
  bool buffer_filled_ = false;  // the last read filled the read buffer: read again before waiting
  Status close_reason_;
  std::unique_ptr<SessionHandler> handler_;
};

Status Endpoint::Impl::Open() {
  error_code ec;
  asio::ip::address address = asio::ip::make_address(options_.bind_address, ec);
  if (ec) {
    tcp::resolver resolver(io_);
    auto results = resolver.resolve(options_.bind_address, "", ec);
    if (ec || results.empty()) {
      return InvalidArgumentError("cannot resolve bind address '" + options_.bind_address +
                                  "': " + ec.message());
    }
    address = results.begin()->endpoint().address();
  }
  tcp::endpoint ep(address, options_.port);
  std::string where = FormatPeer(ep);
  acceptor_.open(ep.protocol(), ec);
  if (ec) return InternalError("open listening socket for " + where + ": " + ec.message());
  // Asio opens sockets without SOCK_CLOEXEC; a child that inherited this one would keep the port
  // bound after the launcher exits (SpawnProcess also marks every inherited fd close-on-exec).
  ::fcntl(acceptor_.native_handle(), F_SETFD, FD_CLOEXEC);
  acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  acceptor_.bind(ep, ec);
  if (ec) return UnavailableError("bind " + where + ": " + ec.message());
  acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return UnavailableError("listen on " + where + ": " + ec.message());
  port_ = acceptor_.local_endpoint(ec).port();
  if (ec) return InternalError("local address of the listening socket: " + ec.message());
  return Status::Ok();
}

void Endpoint::Impl::StartAccept() {
  acceptor_.async_accept([self = shared_from_this()](const error_code& ec, tcp::socket socket) {
    if (self->stopped_) return;
    if (ec) {
      if (ec == asio::error::operation_aborted) return;
      self->RecordAcceptError(ec);
      // Out of descriptors or buffers: give closing connections time to free some.
      self->retry_timer_.expires_after(kAcceptRetryDelay);
      self->retry_timer_.async_wait([self](const error_code& tec) {
        if (!tec && !self->stopped_) self->StartAccept();
      });
      return;
    }
    error_code pec;
    tcp::endpoint remote = socket.remote_endpoint(pec);
    std::string peer = pec ? std::string("unknown peer") : FormatPeer(remote);
    std::string address = pec ? std::string("unknown address") : remote.address().to_string();
    if (const size_t limit = self->options_.max_connections; self->connections_.size() >= limit) {
      self->Refuse(socket, address, std::to_string(limit) + " connections are open already");
    } else if (Admission a = self->admission_.Admit(address); a != Admission::kAdmitted) {
      self->Refuse(socket, address, DescribeRefusal(a, self->admission_.limits()));
    } else {
      auto c = std::make_shared<Connection>(self, std::move(socket), std::move(peer),
                                            std::move(address));
      self->connections_.emplace(c.get(), c);
      c->ArmHandshakeDeadline();
      self->DeferHandshakeStep([c] { c->Start(); });
    }
    self->StartAccept();
  });
}

void Endpoint::Impl::Refuse(tcp::socket& socket, const std::string& address,
                            std::string_view reason) {
  error_code ignored;
  socket.set_option(asio::socket_base::linger(true, 0), ignored);
  socket.close(ignored);
  RecordRefusal(address, reason);
}

void Endpoint::Impl::RecordRefusal(const std::string& address, std::string_view reason) {
  if (auto line = refusals_.Record(address, reason, Clock::now())) Log(*line);
  ScheduleReport();
}

void Endpoint::Impl::RecordAcceptError(const error_code& ec) {
  latest_accept_error_ = ec.message();
  if (!accept_errors_since_) {
    accept_errors_since_ = Clock::now();
    Log("accept: " + latest_accept_error_ + " (further accept failures are counted and reported every " +
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                           options_.refusal_report_interval).count()) + " s)");
  }
  ++accept_errors_;
  ScheduleReport();
}

void Endpoint::Impl::ScheduleReport() {
  if (report_scheduled_ || stopped_) return;
  std::optional<Clock::time_point> due = refusals_.due();
  if (accept_errors_since_) {
    Clock::time_point accept_due = *accept_errors_since_ + options_.refusal_report_interval;
    due = due ? std::min(*due, accept_due) : accept_due;
  }
  if (!due) return;
  report_scheduled_ = true;
  report_timer_.expires_at(*due);
  report_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    self->report_scheduled_ = false;
    if (ec || self->stopped_) return;
    self->Report(/*final=*/false);
    self->ScheduleReport();
  });
}

void Endpoint::Impl::Report(bool final) {
  const Clock::time_point now = Clock::now();
  for (const std::string& line : refusals_.Flush(now, final)) Log(line);
  if (accept_errors_since_ &&
      (final || now >= *accept_errors_since_ + options_.refusal_report_interval)) {
    if (accept_errors_ > 1) {
      char elapsed[32];
      std::snprintf(elapsed, sizeof(elapsed), "%.1f",
                    std::chrono::duration<double>(now - *accept_errors_since_).count());
      Log("accept failed " + std::to_string(accept_errors_) + " times in the last " + elapsed +
          " s; latest: " + latest_accept_error_);
    }
    accept_errors_ = 0;
    accept_errors_since_.reset();
  }
}

void Endpoint::Impl::DeferHandshakeStep(std::function<void()> step) {
  handshake_steps_.push_back(std::move(step));
  if (steps_posted_) return;
  steps_posted_ = true;
  asio::post(io_, [self = shared_from_this()] { self->RunHandshakeSteps(); });
}

// Runs from its own post, so it queues behind every handler that was ready before it; when work
// is left it posts itself again, behind the completions the next poll of the sockets brings.
void Endpoint::Impl::RunHandshakeSteps() {
  for (size_t i = 0; i < kHandshakeStepsPerTurn && !handshake_steps_.empty(); ++i) {
    std::function<void()> step = std::move(handshake_steps_.front());
    handshake_steps_.pop_front();
    step();
  }
  if (handshake_steps_.empty() || stopped_) {
    steps_posted_ = false;
    return;
  }
  asio::post(io_, [self = shared_from_this()] { self->RunHandshakeSteps(); });
}

void Endpoint::Impl::StopNow() {
  if (stopped_) return;
  stopped_ = true;
  error_code ignored;
  acceptor_.close(ignored);
  retry_timer_.cancel();
  report_timer_.cancel();
  handshake_steps_.clear();
  // Abort only schedules the close, so iterating over a copy is not needed; take one anyway
  // because Remove() runs later and the map must not change under the loop.
  std::vector<std::shared_ptr<Connection>> open;
  for (auto& [ptr, c] : connections_) {
    // A connection its owner closed keeps flushing what it was told last (a RELEASE to an agent).
    if (!c->flushing()) open.push_back(c);
  }
  for (auto& c : open) c->Abort(AbortedError("endpoint stopped"));
  Report(/*final=*/true);
}

void Endpoint::Impl::BeginGenerationNow(int generation) {
  DSLAUNCH_CHECK(generation >= generation_)
      << "BeginGeneration(" << generation << ") after generation " << generation_;
  generation_ = generation;
  // Abort only schedules the close, so connections_ does not change under the loop.
  size_t closed = 0;
  for (auto& [ptr, c] : connections_) {
    if (!c->open() || c->role() != PeerRole::kStoreClient || c->generation() >= generation) {
      continue;
    }
    std::optional<AuthRejection> fenced =
        FenceGeneration(c->role(), options_.job_id, c->generation(), generation);
    c->Abort(AbortedError(fenced->message));
    ++closed;
  }
  if (closed > 0) {
    Log("generation " + std::to_string(generation) + " began: closed " + std::to_string(closed) +
        " store connection(s) of earlier generations");
  }
}

void Endpoint::Impl::Remove(Connection* c) { connections_.erase(c); }

Endpoint::Endpoint(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Endpoint::~Endpoint() { Stop(); }

Result<std::unique_ptr<Endpoint>> Endpoint::Listen(asio::io_context& io, EndpointOptions options) {
  if (options.job_id.empty()) return InvalidArgumentError("endpoint needs a job id");
  if (options.job_id.size() > kMaxJobIdBytes)
    return InvalidArgumentError("endpoint job id too long");
  if (options.secret.empty()) return InvalidArgumentError("endpoint needs a secret");
  auto impl = std::make_shared<Impl>(io, std::move(options));
  DSLAUNCH_RETURN_IF_ERROR(impl->Open());
  impl->StartAccept();
  return std::unique_ptr<Endpoint>(new Endpoint(std::move(impl)));
}

uint16_t Endpoint::port() const { return impl_->port_; }

void Endpoint::SetSessionFactory(PeerRole role, SessionFactory factory) {
  impl_->factories_[role] = std::move(factory);
}

void Endpoint::BeginGeneration(int generation) { impl_->BeginGenerationNow(generation); }

int Endpoint::generation() const { return impl_->generation_; }

void Endpoint::SetMaxConnections(size_t limit) { impl_->options_.max_connections = limit; }

uint64_t Endpoint::bytes_sent() const { return impl_->bytes_sent_; }

void Endpoint::Stop() {
  asio::dispatch(impl_->io_, [impl = impl_] { impl->StopNow(); });
}

}  // namespace dslaunch
