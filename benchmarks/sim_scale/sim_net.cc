#include "benchmarks/sim_scale/sim_net.h"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <vector>

#include "common/auth/secret.h"
#include "common/check.h"
#include "common/message_types.h"
#include "common/store/proxy_protocol.h"

namespace dslaunch::sim {
namespace {

// Events taken per epoll_wait: enough to drain a burst of thousands of ready sockets in a few
// calls.
constexpr int kEventsPerWait = 1024;
// Bytes per read call.
constexpr size_t kReadChunk = 64u << 10;

}  // namespace

SimLoop::SimLoop() : epoll_fd_(::epoll_create1(EPOLL_CLOEXEC)) {
  DSLAUNCH_CHECK(epoll_fd_ >= 0) << "epoll_create1 failed";
}

SimLoop::~SimLoop() { ::close(epoll_fd_); }

void SimLoop::Watch(int fd, uint32_t events, Watched* w) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = w;
  DSLAUNCH_CHECK(::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) == 0) << "epoll_ctl ADD: " << errno;
}

void SimLoop::Modify(int fd, uint32_t events, Watched* w) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = w;
  DSLAUNCH_CHECK(::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev) == 0) << "epoll_ctl MOD: " << errno;
}

void SimLoop::Forget(int fd) { ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr); }

void SimLoop::At(Clock::time_point when, std::function<void()> fn) { timers_.emplace(when, std::move(fn)); }

void SimLoop::FlushLater(Watched* w) { to_flush_.push_back(w); }

void SimLoop::FlushAll() {
  // OnFlush may queue more (a reply handled while flushing does not happen: flushing only writes).
  std::vector<Watched*> batch;
  batch.swap(to_flush_);
  for (Watched* w : batch) w->OnFlush();
}

bool SimLoop::RunUntil(const std::function<bool()>& done, Clock::time_point deadline) {
  std::vector<epoll_event> events(kEventsPerWait);
  while (!done()) {
    Clock::time_point now = Clock::now();
    while (!timers_.empty() && timers_.begin()->first <= now) {
      auto fn = std::move(timers_.begin()->second);
      timers_.erase(timers_.begin());
      fn();
    }
    FlushAll();
    if (done()) break;
    if (now >= deadline) return false;
    Clock::time_point wake = deadline;
    if (!timers_.empty()) wake = std::min(wake, timers_.begin()->first);
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
    int n = ::epoll_wait(epoll_fd_, events.data(), kEventsPerWait,
                         static_cast<int>(std::clamp<int64_t>(ms, 0, INT_MAX)));
    if (n < 0 && errno != EINTR) DSLAUNCH_CHECK(false) << "epoll_wait: " << errno;
    for (int i = 0; i < n; ++i) static_cast<Watched*>(events[i].data.ptr)->OnEvents(events[i].events);
    FlushAll();
  }
  return true;
}

Result<sockaddr_in> ParseIpv4(const std::string& host, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    return InvalidArgumentError("'" + host + "' is not an IPv4 address");
  }
  return a;
}

SimConnection::~SimConnection() {
  if (fd_ >= 0) {
    loop_.Forget(fd_);
    ::close(fd_);
  }
}

void SimConnection::Start(OpenFn open, FrameFn frame, ErrorFn error) {
  on_open_ = std::move(open);
  on_frame_ = std::move(frame);
  on_error_ = std::move(error);
  Connect();
}

void SimConnection::Connect() {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return Fail(ErrnoError("socket", errno));
  int one = 1;
  ::setsockopt(fd_, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in src{};
  src.sin_family = AF_INET;
  src.sin_addr = target_.source;
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&src), sizeof(src)) != 0) {
    return Fail(ErrnoError("bind to the simulated node's address", errno));
  }
  state_ = State::kConnecting;
  int rc = ::connect(fd_, reinterpret_cast<const sockaddr*>(&target_.server), sizeof(target_.server));
  if (rc != 0 && errno != EINPROGRESS) return Retry();
  watching_ = EPOLLIN | EPOLLOUT;
  loop_.Watch(fd_, watching_, this);
}

void SimConnection::Retry() {
  if (fd_ >= 0) {
    loop_.Forget(fd_);
    ::close(fd_);
    fd_ = -1;
  }
  ++retries_;
  if (target_.retries != nullptr) ++*target_.retries;
  decoder_ = wire::FrameDecoder();
  out_.clear();
  out_pos_ = 0;
  state_ = State::kIdle;
  auto delay = delay_;
  delay_ = std::min(delay_ * 2, kRetryMaxDelay);
  loop_.At(Clock::now() + delay, [this] { Connect(); });
}

void SimConnection::Fail(const Status& st) {
  if (state_ == State::kClosed) return;
  Close();
  if (on_error_) on_error_(st);
}

void SimConnection::Close() {
  if (fd_ >= 0) {
    loop_.Forget(fd_);
    ::close(fd_);
    fd_ = -1;
  }
  state_ = State::kClosed;
}

void SimConnection::Send(const wire::Frame& f) { Send(f.type, f.payload); }

void SimConnection::Send(uint8_t type, std::string_view payload) {
  if (state_ == State::kClosed) return;
  wire::AppendFrame(type, payload, out_);
  if (state_ == State::kConnecting || flush_pending_) return;
  flush_pending_ = true;
  loop_.FlushLater(this);
}

void SimConnection::OnFlush() {
  flush_pending_ = false;
  if (fd_ >= 0 && state_ != State::kConnecting && state_ != State::kClosed && state_ != State::kIdle) Flush();
}

void SimConnection::Request(const StoreRequest& request, FrameFn reply) {
  if (proxied_) {
    const uint64_t tag = ++next_tag_;
    tagged_.emplace(tag, std::move(reply));
    Send(msg::kStoreProxied, EncodeProxiedRequest(tag, request));
    return;
  }
  replies_.push_back(std::move(reply));
  Send(request.type, EncodeStoreRequest(request));
}

void SimConnection::Flush() {
  while (out_pos_ < out_.size()) {
    ssize_t n = ::send(fd_, out_.data() + out_pos_, out_.size() - out_pos_, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      return Fail(ErrnoError("send", errno));
    }
    out_pos_ += static_cast<size_t>(n);
  }
  if (out_pos_ == out_.size()) {
    out_.clear();
    out_pos_ = 0;
  }
  uint32_t want = EPOLLIN | (out_.empty() ? 0u : static_cast<uint32_t>(EPOLLOUT));
  if (want != watching_ && fd_ >= 0) {
    watching_ = want;
    loop_.Modify(fd_, want, this);
  }
}

void SimConnection::OnEvents(uint32_t events) {
  if (state_ == State::kConnecting) {
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return Retry();
    state_ = State::kChallenge;
    Flush();
    if (state_ == State::kClosed) return;
  }
  if (events & EPOLLOUT) Flush();
  if (state_ == State::kClosed || state_ == State::kIdle) return;
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) ReadAll();
}

void SimConnection::ReadAll() {
  char buf[kReadChunk];
  for (;;) {
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      // Closed before the CHALLENGE: the endpoint refused it at accept; retry as clients do.
      if (state_ == State::kChallenge) return Retry();
      return Fail(UnavailableError(n == 0 ? "closed by the launcher" : "recv failed"));
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    decoder_.Feed(buf, static_cast<size_t>(n));
    for (;;) {
      auto next = decoder_.Next();
      if (!next.ok()) return Fail(next.status());
      if (!next->has_value()) break;
      OnFrame(std::move(**next));
      if (state_ == State::kClosed || state_ == State::kIdle) return;
    }
  }
}

void SimConnection::OnFrame(wire::Frame f) {
  switch (state_) {
    case State::kChallenge: {
      if (f.type != msg::kChallenge) return Fail(InvalidArgumentError("expected CHALLENGE"));
      auto c = DecodeChallenge(f.payload);
      if (!c.ok()) return Fail(c.status());
      challenge_ = *c;
      auto a = AnswerChallenge(challenge_, target_.secret, target_.role, target_.job_id, target_.generation,
                               RandomBytes(kNonceBytes));
      if (!a.ok()) return Fail(a.status());
      auth_ = *a;
      state_ = State::kAuthOk;
      Send(msg::kAuth, EncodeAuth(auth_));
      return;
    }
    case State::kAuthOk: {
      if (f.type == msg::kAuthRejected) {
        auto r = DecodeAuthRejected(f.payload);
        return Fail(r.ok() ? RejectionToStatus(*r) : r.status());
      }
      if (f.type != msg::kAuthOk) return Fail(InvalidArgumentError("expected AUTH_OK"));
      auto proof = DecodeAuthOk(f.payload);
      if (!proof.ok()) return Fail(proof.status());
      if (Status st = VerifyServerProof(*proof, target_.secret, challenge_, auth_); !st.ok()) return Fail(st);
      state_ = State::kOpen;
      if (on_open_) on_open_();
      return;
    }
    case State::kOpen:
      if (f.type == msg::kStoreProxiedReply) {
        auto r = DecodeProxiedReply(f.payload);
        if (!r.ok()) return Fail(r.status());
        auto it = tagged_.find(r->tag);
        if (it == tagged_.end()) return Fail(InvalidArgumentError("a reply to unknown tag " + std::to_string(r->tag)));
        FrameFn reply = std::move(it->second);
        tagged_.erase(it);
        reply(wire::Frame{r->type, std::move(r->payload)});
        return;
      }
      if ((f.type == msg::kStoreOk || f.type == msg::kStoreError) && !replies_.empty()) {
        FrameFn reply = std::move(replies_.front());
        replies_.pop_front();
        reply(std::move(f));
        return;
      }
      if (on_frame_) on_frame_(std::move(f));
      return;
    default:
      return;
  }
}

}  // namespace dslaunch::sim
