#include "common/endpoint/endpoint_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <thread>

#include "common/auth/secret.h"
#include "common/message_types.h"

namespace dslaunch {
namespace {

using Clock = std::chrono::steady_clock;

// One TCP connect attempt (one resolved address) gives up after this, so that a host that drops
// SYNs does not stop the other addresses of a name from being tried before the deadline.
constexpr std::chrono::seconds kConnectAttemptTimeout{5};
// Bytes per recv call.
constexpr size_t kReceiveChunkBytes = 16u << 10;
// The server's handshake frames (CHALLENGE, AUTH_OK, AUTH_REJECTED) are far smaller; a larger
// length means something other than a dslaunch endpoint answered.
constexpr uint32_t kMaxHandshakeFrameBytes = 4096;

// Milliseconds until `deadline` for poll(): -1 for no deadline, 0 once it has passed.
int PollTimeoutMs(Clock::time_point deadline) {
  if (deadline == Clock::time_point::max()) return -1;
  auto now = Clock::now();
  if (now >= deadline) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

Status SetBlockingWithNoDelay(int fd, bool tcp = true) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) return ErrnoError("fcntl", errno);
  if (!tcp) return Status::Ok();
  int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return ErrnoError("setsockopt TCP_NODELAY", errno);
  }
  return Status::Ok();
}

// Connects to one resolved address, bounded by `deadline`.
Result<UniqueFd> ConnectOne(const addrinfo& ai, Clock::time_point deadline) {
  UniqueFd fd(
      ::socket(ai.ai_family, ai.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai.ai_protocol));
  if (!fd.valid()) return ErrnoError("socket", errno);
  if (::connect(fd.get(), ai.ai_addr, ai.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) return ErrnoError("connect", errno);
    pollfd p{fd.get(), POLLOUT, 0};
    int r;
    do {
      r = ::poll(&p, 1, PollTimeoutMs(deadline));
    } while (r < 0 && errno == EINTR);
    if (r < 0) return ErrnoError("poll", errno);
    if (r == 0) return ErrnoError("connect", ETIMEDOUT);
    int err = 0;
    socklen_t len = sizeof(err);
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0)
      return ErrnoError("getsockopt", errno);
    if (err != 0) return ErrnoError("connect", err);
  }
  DSLAUNCH_RETURN_IF_ERROR(SetBlockingWithNoDelay(fd.get()));
  return fd;
}

// Resolves `hp` and connects to the first address that accepts.
Result<UniqueFd> ConnectAny(const HostPort& hp, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  std::string port = std::to_string(hp.port);
  int rc = ::getaddrinfo(hp.host.c_str(), port.c_str(), &hints, &list);
  if (rc != 0) {
    return UnavailableError("resolve '" + hp.host + "': " + ::gai_strerror(rc));
  }
  Status last = UnavailableError("'" + hp.host + "' resolved to no address");
  for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    auto attempt_deadline = std::min(deadline, Clock::now() + kConnectAttemptTimeout);
    auto fd = ConnectOne(*ai, attempt_deadline);
    if (fd.ok()) {
      ::freeaddrinfo(list);
      return fd;
    }
    last = fd.status();
  }
  ::freeaddrinfo(list);
  return last;
}

// The node's store proxy at `path` is gone: its agent exited or was killed (`detail` says how it
// showed).
Status ProxyGone(const std::string& path, const std::string& detail) {
  return UnavailableError("the node's store proxy at " + path + " is gone (its dslaunch-agent exited or was killed): " +
                          detail);
}

// Connects to the Unix-domain socket at `path`: a node's store proxy (docs/protocol.md, "Store
// proxy"). Not retried: the agent listens before it starts its workers, so a socket that is
// missing or refuses means the agent is gone.
Result<UniqueFd> ConnectUnix(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return InvalidArgumentError("bad store proxy socket path '" + path + "' (1 to " +
                                std::to_string(sizeof(addr.sun_path) - 1) + " bytes)");
  }
  path.copy(addr.sun_path, path.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoError("socket", errno);
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    if (err == ENOENT || err == ECONNREFUSED) return ProxyGone(path, std::strerror(err));
    return ErrnoError("connect to the store proxy at " + path, err);
  }
  DSLAUNCH_RETURN_IF_ERROR(SetBlockingWithNoDelay(fd.get(), /*tcp=*/false));
  return fd;
}

// Reads exactly `n` bytes, waiting until `deadline`.
Status ReadExact(int fd, char* out, size_t n, Clock::time_point deadline) {
  size_t got = 0;
  while (got < n) {
    DSLAUNCH_RETURN_IF_ERROR(WaitReadable(fd, deadline));
    ssize_t k = ::recv(fd, out + got, n - got, 0);
    if (k == 0) return UnavailableError("connection closed by the peer");
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return ErrnoError("recv", errno);
    }
    got += static_cast<size_t>(k);
  }
  return Status::Ok();
}

// Reads one handshake frame without reading past its end: the server may send session frames
// right behind AUTH_OK, and they belong to whoever uses the socket next.
Result<wire::Frame> ReceiveHandshakeFrame(int fd, Clock::time_point deadline) {
  char header[wire::kFrameHeaderBytes];
  DSLAUNCH_RETURN_IF_ERROR(ReadExact(fd, header, sizeof(header), deadline));
  const auto* u = reinterpret_cast<const unsigned char*>(header);
  uint32_t len =
      (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | uint32_t{u[3]};
  if (len == 0 || len > kMaxHandshakeFrameBytes) {
    return InvalidArgumentError("handshake frame of " + std::to_string(len) +
                                " bytes (not a dslaunch endpoint?)");
  }
  std::string body(len, '\0');
  DSLAUNCH_RETURN_IF_ERROR(ReadExact(fd, body.data(), len, deadline));
  return wire::Frame{static_cast<uint8_t>(body[0]), body.substr(1)};
}

// Runs the client half of the handshake after CHALLENGE arrived.
Status Authenticate(int fd, const Challenge& challenge, std::string_view job_id,
                    std::string_view secret, PeerRole role, int generation,
                    Clock::time_point deadline) {
  DSLAUNCH_ASSIGN_OR_RETURN(
      AuthRequest auth,
      AnswerChallenge(challenge, secret, role, job_id, generation, RandomBytes(kNonceBytes)));
  DSLAUNCH_RETURN_IF_ERROR(SendFrame(fd, msg::kAuth, EncodeAuth(auth)));
  auto reply = ReceiveHandshakeFrame(fd, deadline);
  if (!reply.ok()) {
    if (reply.status().code() == StatusCode::kUnavailable) {
      return UnauthenticatedError("endpoint closed the connection during authentication");
    }
    return reply.status().WithContext("waiting for AUTH_OK");
  }
  if (reply->type == msg::kAuthRejected) {
    DSLAUNCH_ASSIGN_OR_RETURN(AuthRejection rejection, DecodeAuthRejected(reply->payload));
    return RejectionToStatus(rejection);
  }
  if (reply->type != msg::kAuthOk) {
    return InvalidArgumentError("expected AUTH_OK, got message type " +
                                std::to_string(reply->type));
  }
  DSLAUNCH_ASSIGN_OR_RETURN(std::string proof, DecodeAuthOk(reply->payload));
  return VerifyServerProof(proof, secret, challenge, auth);
}

// Runs the handshake on a fresh connection to `where`. A connection closed before the CHALLENGE
// sets *before_challenge (when given) and is kUnavailable: the caller may retry.
Result<UniqueFd> HandshakeAsClient(UniqueFd fd, const std::string& where, std::string_view job_id,
                                   std::string_view secret, PeerRole role, int generation,
                                   Clock::time_point deadline, bool* before_challenge = nullptr) {
  auto challenge_frame = ReceiveHandshakeFrame(fd.get(), deadline);
  if (!challenge_frame.ok()) {
    if (before_challenge != nullptr && challenge_frame.status().code() == StatusCode::kUnavailable) {
      *before_challenge = true;
      return challenge_frame.status();  // the caller's "last error" when it gives up
    }
    return challenge_frame.status().WithContext(where);
  }
  if (challenge_frame->type != msg::kChallenge) {
    return InvalidArgumentError(where + ": not a dslaunch endpoint (first message type " +
                                std::to_string(challenge_frame->type) + ")");
  }
  auto challenge = DecodeChallenge(challenge_frame->payload);
  if (!challenge.ok()) return challenge.status().WithContext(where);
  Status st = Authenticate(fd.get(), *challenge, job_id, secret, role, generation, deadline);
  if (!st.ok()) {
    return st.WithContext(where + " (job '" + std::string(job_id) + "', " + PeerRoleName(role) +
                          ", generation " + std::to_string(generation) + ")");
  }
  return fd;
}

}  // namespace

Status WaitReadable(int fd, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, PollTimeoutMs(deadline));
    if (r > 0) return Status::Ok();
    if (r == 0) return DeadlineExceededError("no reply before the deadline");
    if (errno != EINTR) return ErrnoError("poll", errno);
  }
}

std::optional<std::string> UnixSocketPath(std::string_view address) {
  if (address.substr(0, kUnixAddressPrefix.size()) != kUnixAddressPrefix) return std::nullopt;
  return std::string(address.substr(kUnixAddressPrefix.size()));
}

Result<HostPort> ParseHostPort(std::string_view address) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError("bad endpoint address '" + std::string(address) + "': " +
                                std::string(why) + " (expected host:port or [v6addr]:port)");
  };
  HostPort hp;
  std::string_view port;
  if (!address.empty() && address.front() == '[') {
    size_t close = address.find(']');
    if (close == std::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return bad("unterminated [ ]");
    }
    hp.host = std::string(address.substr(1, close - 1));
    port = address.substr(close + 2);
  } else {
    size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) return bad("no port");
    if (address.find(':') != colon) return bad("IPv6 addresses need brackets");
    hp.host = std::string(address.substr(0, colon));
    port = address.substr(colon + 1);
  }
  if (hp.host.empty()) return bad("empty host");
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
    return bad("port must be 1..65535");
  }
  hp.port = static_cast<uint16_t>(value);
  return hp;
}

Result<UniqueFd> ConnectToEndpoint(const std::string& address, std::string_view job_id,
                                   std::string_view secret, PeerRole role, int generation,
                                   Clock::time_point deadline) {
  std::string where = "endpoint " + address;
  std::optional<std::string> unix_path = UnixSocketPath(address);
  HostPort hp;
  if (!unix_path) {
    DSLAUNCH_ASSIGN_OR_RETURN(hp, ParseHostPort(address));
  }
  auto delay = kConnectRetryInitialDelay;
  Status last;
  for (int attempt = 1;; ++attempt) {
    if (unix_path) {
      auto fd = ConnectUnix(*unix_path);
      if (!fd.ok()) return fd.status().WithContext(where);
      // Closed before the challenge: the connection reached the socket as the agent died (its
      // queue is reset when the socket's last holder closes it), so the proxy is gone too.
      bool before_challenge = false;
      auto done = HandshakeAsClient(std::move(*fd), where, job_id, secret, role, generation, deadline,
                                    &before_challenge);
      if (!done.ok() && before_challenge) return ProxyGone(*unix_path, done.status().message()).WithContext(where);
      return done;
    }
    auto fd = ConnectAny(hp, deadline);
    if (fd.ok()) {
      bool before_challenge = false;
      auto done = HandshakeAsClient(std::move(*fd), where, job_id, secret, role, generation,
                                    deadline, &before_challenge);
      // Closed before the challenge (e.g. the endpoint is at its connection limit): retry.
      if (done.ok() || !before_challenge) return done;
      last = done.status();
    } else {
      last = fd.status();
    }
    if (Clock::now() + delay >= deadline) {
      return DeadlineExceededError(where + ": not reachable after " + std::to_string(attempt) +
                                   " attempts; last error: " + last.message());
    }
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, kConnectRetryMaxDelay);
  }
}

Status SendFrame(int fd, uint8_t type, std::string_view payload) {
  if (payload.size() + 1 > wire::kMaxFrameBytes) {
    return InvalidArgumentError("frame of " + std::to_string(payload.size() + 1) +
                                " bytes exceeds the limit of " +
                                std::to_string(wire::kMaxFrameBytes));
  }
  auto len = static_cast<uint32_t>(payload.size() + 1);
  char header[wire::kFrameHeaderBytes + 1] = {
      static_cast<char>(len >> 24), static_cast<char>(len >> 16), static_cast<char>(len >> 8),
      static_cast<char>(len), static_cast<char>(type)};
  iovec iov[2] = {{header, sizeof(header)}, {const_cast<char*>(payload.data()), payload.size()}};
  int iov_index = 0;
  while (iov_index < 2) {
    msghdr m{};
    m.msg_iov = iov + iov_index;
    m.msg_iovlen = 2 - iov_index;
    ssize_t n = ::sendmsg(fd, &m, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, -1);
        continue;
      }
      return ErrnoError("send", errno);
    }
    auto sent = static_cast<size_t>(n);
    while (iov_index < 2 && sent >= iov[iov_index].iov_len) {
      sent -= iov[iov_index].iov_len;
      ++iov_index;
    }
    if (iov_index < 2) {
      iov[iov_index].iov_base = static_cast<char*>(iov[iov_index].iov_base) + sent;
      iov[iov_index].iov_len -= sent;
    }
  }
  return Status::Ok();
}

Result<wire::Frame> ReceiveFrame(int fd, wire::FrameDecoder& decoder, Clock::time_point deadline) {
  char buf[kReceiveChunkBytes];
  for (;;) {
    auto next = decoder.Next();
    if (!next.ok()) return next.status();
    if (next->has_value()) return std::move(**next);
    DSLAUNCH_RETURN_IF_ERROR(WaitReadable(fd, deadline));
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0) return UnavailableError("connection closed by the peer");
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return ErrnoError("recv", errno);
    }
    decoder.Feed(buf, static_cast<size_t>(n));
  }
}

}  // namespace dslaunch
