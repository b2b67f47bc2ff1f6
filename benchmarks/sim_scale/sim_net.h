// The simulator's network layer (benchmarks/sim_scale.cc, docs/benchmarks.md "Control plane at
// scale"): one epoll loop on one thread, non-blocking sockets, and a client connection that speaks
// the launcher's real protocol with the repository's own code (the handshake of
// common/auth/handshake.h, frames of common/wire.h). Not thread-safe: everything runs on the
// thread that calls SimLoop::Run.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/auth/handshake.h"
#include "common/status.h"
#include "common/store/store_protocol.h"
#include "common/wire.h"

namespace dslaunch::sim {

using Clock = std::chrono::steady_clock;

// Something the loop watches: OnEvents gets epoll's event bits.
class Watched {
 public:
  virtual ~Watched() = default;
  virtual void OnEvents(uint32_t events) = 0;
  // Called once per turn of the loop after SimLoop::FlushLater (writes batched per turn).
  virtual void OnFlush() {}
};

class SimLoop {
 public:
  SimLoop();
  ~SimLoop();
  SimLoop(const SimLoop&) = delete;
  SimLoop& operator=(const SimLoop&) = delete;

  // Watches `fd` for `events` (EPOLLIN, EPOLLOUT), replacing what it watched before.
  void Watch(int fd, uint32_t events, Watched* w);
  void Modify(int fd, uint32_t events, Watched* w);
  void Forget(int fd);
  // Runs `fn` once, at `when` or soon after.
  void At(Clock::time_point when, std::function<void()> fn);
  // Calls w->OnFlush() once at the end of this turn of the loop, however often it is asked: a
  // connection that queued many requests in one turn sends them with one system call.
  void FlushLater(Watched* w);
  // Drops every timer not yet run.
  void Cancel() { timers_.clear(); }
  // Runs until `done()` holds (checked after every batch of events) or `deadline` passes;
  // returns whether `done()` held.
  bool RunUntil(const std::function<bool()>& done, Clock::time_point deadline);

 private:
  void FlushAll();

  int epoll_fd_ = -1;
  std::multimap<Clock::time_point, std::function<void()>> timers_;
  std::vector<Watched*> to_flush_;
};

// Where a connection goes, and what it proves.
struct ConnectTarget {
  sockaddr_in server{};
  in_addr source{};  // the simulated node's own loopback address (127.x.y.z)
  std::string job_id;
  std::string secret;
  PeerRole role = PeerRole::kStoreClient;
  int generation = 0;
  int64_t* retries = nullptr;  // counts refused attempts, when set
};

// Retries of a connection closed before its CHALLENGE (the endpoint at a bound) back off as
// ConnectToEndpoint's do (common/endpoint/endpoint_client.h).
inline constexpr std::chrono::milliseconds kRetryInitialDelay{10};
inline constexpr std::chrono::milliseconds kRetryMaxDelay{500};

// One client connection: connect (retrying refusals), handshake, then frames both ways. Replies
// to store requests arrive in request order, so Request() keeps a queue of callbacks.
class SimConnection : public Watched {
 public:
  using OpenFn = std::function<void()>;
  using FrameFn = std::function<void(wire::Frame)>;
  using ErrorFn = std::function<void(const Status&)>;

  SimConnection(SimLoop& loop, ConnectTarget target) : loop_(loop), target_(std::move(target)) {}
  ~SimConnection() override;

  // Starts connecting; `open` runs after AUTH_OK, `frame` for every later frame that is not a
  // reply to a Request(), `error` once if the connection fails for good (a rejection, a reset
  // after the handshake).
  void Start(OpenFn open, FrameFn frame, ErrorFn error);
  void Send(const wire::Frame& f);
  void Send(uint8_t type, std::string_view payload);
  // Sends a store request; `reply` gets its STORE_OK or STORE_ERROR frame. After
  // UseProxiedRequests (an agent's control connection carrying its node's store traffic) the
  // request goes as a PROXIED frame under a fresh tag and its PROXIED_REPLY, which may come in any
  // order, is handed to `reply` as the inner frame (docs/protocol.md, "Store proxy").
  void Request(const StoreRequest& request, FrameFn reply);
  void UseProxiedRequests() { proxied_ = true; }
  void Close();

  bool open() const { return state_ == State::kOpen; }
  int retries() const { return retries_; }
  void OnEvents(uint32_t events) override;
  void OnFlush() override;

 private:
  enum class State { kIdle, kConnecting, kChallenge, kAuthOk, kOpen, kClosed };
  void Connect();
  void Retry();
  void Fail(const Status& st);
  void Flush();
  void ReadAll();
  void OnFrame(wire::Frame f);

  SimLoop& loop_;
  ConnectTarget target_;
  int fd_ = -1;
  State state_ = State::kIdle;
  uint32_t watching_ = 0;
  std::chrono::milliseconds delay_ = kRetryInitialDelay;
  int retries_ = 0;
  Challenge challenge_;
  AuthRequest auth_;
  wire::FrameDecoder decoder_;
  std::string out_;
  size_t out_pos_ = 0;
  bool flush_pending_ = false;
  std::deque<FrameFn> replies_;                  // store client: in request order
  bool proxied_ = false;
  std::unordered_map<uint64_t, FrameFn> tagged_;  // store proxy: by tag
  uint64_t next_tag_ = 0;
  OpenFn on_open_;
  FrameFn on_frame_;
  ErrorFn on_error_;
};

// "127.0.0.1" style address and port to a sockaddr_in; kInvalidArgument if not IPv4.
Result<sockaddr_in> ParseIpv4(const std::string& host, uint16_t port);

}  // namespace dslaunch::sim
