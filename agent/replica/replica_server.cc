#include "agent/replica/replica_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "agent/replica/replica_protocol.h"
#include "common/auth/handshake.h"
#include "common/auth/secret.h"
#include "common/endpoint/endpoint_client.h"
#include "common/message_types.h"

namespace dslaunch::agent::replica {

namespace {

using Clock = std::chrono::steady_clock;

// A listening socket on `ip`, port 0; its address as peers dial it.
Result<std::pair<UniqueFd, std::string>> Listen(const std::string& ip) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  const bool v6 = ip.find(':') != std::string::npos;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    a->sin6_family = AF_INET6;
    if (::inet_pton(AF_INET6, ip.c_str(), &a->sin6_addr) != 1) return InvalidArgumentError("not an address: " + ip);
    len = sizeof(sockaddr_in6);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    a->sin_family = AF_INET;
    if (::inet_pton(AF_INET, ip.c_str(), &a->sin_addr) != 1) return InvalidArgumentError("not an address: " + ip);
    len = sizeof(sockaddr_in);
  }
  UniqueFd fd(::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoError("socket", errno);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) return ErrnoError("bind " + ip, errno);
  if (::listen(fd.get(), 64) != 0) return ErrnoError("listen on " + ip, errno);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return ErrnoError("getsockname", errno);
  const uint16_t port = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                 : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  std::string address = (v6 ? "[" + ip + "]" : ip) + ":" + std::to_string(port);
  return std::pair<UniqueFd, std::string>(std::move(fd), std::move(address));
}

}  // namespace

Result<std::unique_ptr<ReplicaServer>> ReplicaServer::Start(const std::string& ip, ServerOptions options,
                                                            ReplicaStore& store) {
  std::unique_ptr<ReplicaServer> server(new ReplicaServer(std::move(options), store));
  DSLAUNCH_ASSIGN_OR_RETURN(auto listening, Listen(ip));
  server->listener_ = std::move(listening.first);
  server->address_ = std::move(listening.second);
  server->wake_ = UniqueFd(::eventfd(0, EFD_CLOEXEC));
  if (!server->wake_.valid()) return ErrnoError("eventfd", errno);
  server->acceptor_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

ReplicaServer::~ReplicaServer() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (int fd : open_) ::shutdown(fd, SHUT_RDWR);  // a blocked read returns
  }
  if (wake_.valid()) {
    const uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof(one));
  }
  if (acceptor_.joinable()) acceptor_.join();
  {
    std::lock_guard lock(mu_);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

void ReplicaServer::AcceptLoop() {
  for (;;) {
    pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lock(mu_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    open_.push_back(fd);
    threads_.emplace_back([this, fd] { Serve(fd); });
  }
}

void ReplicaServer::Serve(int fd) {
  wire::FrameDecoder in;
  Status served = Handshake(fd, in);
  while (served.ok()) {
    Result<wire::Frame> frame = ReceiveFrame(fd, in, Clock::time_point::max());  // idle between copies
    if (!frame.ok()) {
      if (frame.status().code() != StatusCode::kUnavailable) served = frame.status();
      break;  // closed by the peer (or by the destructor)
    }
    if (frame->type != msg::kSnapshotCopy) {
      served = InvalidArgumentError("expected SNAPSHOT_COPY, got a frame of type " + std::to_string(frame->type));
      break;
    }
    served = ReceiveCopy(fd, in, frame->payload);
  }
  bool stopping = false;
  {
    std::lock_guard lock(mu_);
    stopping = stopping_;
    std::erase(open_, fd);
    ::close(fd);
  }
  if (!served.ok() && !stopping && options_.warn) {
    options_.warn("snapshot copies from a peer node: connection closed: " + served.ToString());
  }
}

Status ReplicaServer::Handshake(int fd, wire::FrameDecoder& in) {
  const auto deadline = Clock::now() + kPeerHandshakeTimeout;
  Challenge challenge;
  challenge.server_nonce = RandomBytes(kNonceBytes);
  DSLAUNCH_RETURN_IF_ERROR(SendFrame(fd, msg::kChallenge, EncodeChallenge(challenge)));
  DSLAUNCH_ASSIGN_OR_RETURN(wire::Frame frame, ReceiveFrame(fd, in, deadline));
  if (frame.type != msg::kAuth) {
    return InvalidArgumentError("expected AUTH, got a frame of type " + std::to_string(frame.type));
  }
  auto checked = CheckAuth(challenge, frame.payload, options_.job_id, options_.secret, 0);
  std::optional<AuthRejection> rejection;
  if (auto* r = std::get_if<AuthRejection>(&checked)) rejection = std::move(*r);
  const AuthRequest* auth = std::get_if<AuthRequest>(&checked);
  if (!rejection && auth->role != PeerRole::kSnapshotPeer) {
    rejection = AuthRejection{AuthRejectReason::kUnknownRole,
                              "an agent's snapshot copies serve snapshot peers only, not " + PeerRoleName(auth->role)};
  }
  if (rejection) {
    SendFrame(fd, msg::kAuthRejected, EncodeAuthRejected(*rejection)).IgnoreError();
    return UnauthenticatedError("refused: " + rejection->message);
  }
  return SendFrame(fd, msg::kAuthOk, EncodeAuthOk(ServerProof(options_.secret, challenge, *auth)));
}

Status ReplicaServer::ReceiveCopy(int fd, wire::FrameDecoder& in, const std::string& payload) {
  Status kept = [&]() -> Status {
    DSLAUNCH_ASSIGN_OR_RETURN(CopyBegin begin, DecodeCopyBegin(payload));
    DSLAUNCH_ASSIGN_OR_RETURN(IncomingCopy copy, store_.Begin(begin.header, begin.bytes));
    // The bytes the frame reader already took past SNAPSHOT_COPY, then the rest straight into the copy.
    DSLAUNCH_RETURN_IF_ERROR(copy.Append(in.TakeBuffered()));
    while (copy.received() < begin.bytes) DSLAUNCH_RETURN_IF_ERROR(copy.ReadFrom(fd, Clock::now() + kCopyReadTimeout));
    const CopyStored stored{copy.header().step, copy.header().rank};
    DSLAUNCH_RETURN_IF_ERROR(store_.Keep(std::move(copy)));
    return SendFrame(fd, msg::kSnapshotStored, EncodeCopyStored(stored));
  }();
  if (!kept.ok()) {
    // Refused, then closed: the sender cannot have to skip the rest of a copy it is still sending.
    SendFrame(fd, msg::kSnapshotRefused, EncodeCopyRefused(kept.ToString())).IgnoreError();
  }
  return kept;
}

}  // namespace dslaunch::agent::replica
