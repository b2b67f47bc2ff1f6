// Test support: a TCP port this test holds from start to end, for a server that must listen on a
// port known before it starts (an endpoint started after its client, `dslaunch --no_ssh
// --rdzv_port`).
//
// ReservedPort binds 0.0.0.0:0 with SO_REUSEADDR and reads the port back; it never listens. While
// it lives, connections to the port are refused, no other program can bind the port (nor get it as
// an ephemeral port), but a server of this test that sets SO_REUSEADDR too (every dslaunch
// endpoint does) can bind and listen on it: Linux lets sockets with SO_REUSEADDR share a port as
// long as at most one listens. This replaces picking a free port, closing it and hoping it is
// still free when the server binds it.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace dslaunch::testing {

class ReservedPort {
 public:
  ReservedPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE_MESSAGE(fd_ >= 0, "socket: " << std::strerror(errno));
    const int one = 1;
    REQUIRE(::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    REQUIRE_MESSAGE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0, "bind: " << std::strerror(errno));
    socklen_t len = sizeof(addr);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
  }
  ~ReservedPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  ReservedPort(const ReservedPort&) = delete;
  ReservedPort& operator=(const ReservedPort&) = delete;

  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace dslaunch::testing
