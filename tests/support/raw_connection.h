// Test support: a raw TCP connection to a server, for what a client that is not a browser may
// send (a Host header of the test's choice, no token, a malformed request).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <chrono>
#include <string>

namespace dslaunch::testing {

class RawConnection {
 public:
  // To 127.0.0.1:`port` from `source`, another address of 127.0.0.0/8 if the test wants each
  // connection to be a client of its own; the test fails if it cannot connect.
  explicit RawConnection(uint16_t port, const char* source = "127.0.0.1") : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    REQUIRE(::inet_pton(AF_INET, source, &from.sin_addr) == 1);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof(from)) == 0);
    REQUIRE(Connect("127.0.0.1", port));
  }
  // To `address`:`port`; connected() says whether it could (a refused connection is an answer).
  RawConnection(const std::string& address, uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    connected_ = Connect(address, port);
  }
  ~RawConnection() { ::close(fd_); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  void Send(const std::string& bytes) { REQUIRE(::write(fd_, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size())); }
  // Reads until `until` appears, the peer closes, or `timeout` passes.
  std::string Read(const std::string& until, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::string got;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (got.find(until) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fd_, buf, sizeof(buf));
      if (n <= 0) {
        closed_ = true;
        break;
      }
      got.append(buf, static_cast<size_t>(n));
    }
    return got;
  }
  // Whether the server has closed the connection (reads what came before the end).
  bool Closed() {
    while (!closed_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) return false;
      char buf[4096];
      const ssize_t n = ::read(fd_, buf, sizeof(buf));
      if (n <= 0) closed_ = true;
    }
    return true;
  }

 private:
  bool Connect(const std::string& address, uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    REQUIRE(::inet_pton(AF_INET, address.c_str(), &a.sin_addr) == 1);
    return ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }

  int fd_;
  bool connected_ = true;
  bool closed_ = false;
};

}  // namespace dslaunch::testing
