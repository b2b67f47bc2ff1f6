// Bounds on connections to the launcher's endpoint that have not authenticated yet, in total and
// per source address, so that a flood of idle connections from one node cannot use up the
// endpoint (docs/protocol.md, "Connections before authentication"). Pure bookkeeping: the
// endpoint asks Admit() for every accepted connection and closes the ones it refuses at once,
// before sending anything; a refused client retries until its own deadline.
//
// Why refuse the newest rather than evict the oldest: a client whose connection closes before
// the CHALLENGE retries (ConnectToEndpoint), while one closed after it fails for good; and
// closing a connection at accept costs the endpoint less than serving one, which keeps it
// draining the kernel's accept queue faster than a flood can fill it.
//
// Not thread-safe; the endpoint uses it on its io_context thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>

namespace dslaunch {

// At most this many connections in their handshake at once: 16 addresses at their own bound.
// A legitimate handshake takes one round trip, so even thousands of ranks connecting at the
// same moment pass through quickly; the ones refused retry within 10-500 ms.
inline constexpr size_t kMaxUnauthenticatedConnections = 1024;
// At most this many from one source address: more than the ranks and agent a node starts at
// once, each opening one store connection. One address cannot take more than 1/16 of the total.
inline constexpr size_t kMaxUnauthenticatedPerAddress = 64;

struct HandshakeLimits {
  size_t total = kMaxUnauthenticatedConnections;
  size_t per_address = kMaxUnauthenticatedPerAddress;
};

enum class Admission {
  kAdmitted,
  kAddressFull,  // the source address has per_address connections in their handshake
  kTotalFull,    // `total` connections are in their handshake
};

class HandshakeAdmission {
 public:
  explicit HandshakeAdmission(HandshakeLimits limits = {}) : limits_(limits) {}

  // Counts a new connection from `address` (an IP address without port) and returns kAdmitted
  // if both bounds allow it; otherwise counts nothing and returns the bound that refused it
  // (the per-address bound is checked first, so a flooding address is told about its own).
  Admission Admit(const std::string& address);
  // A connection admitted from `address` authenticated or closed. Precondition: admitted and
  // not released since (checked).
  void Release(const std::string& address);

  size_t total() const { return total_; }
  size_t from(const std::string& address) const;
  const HandshakeLimits& limits() const { return limits_; }

 private:
  HandshakeLimits limits_;
  size_t total_ = 0;
  std::unordered_map<std::string, size_t> per_address_;  // only addresses with a count above 0
};

// Why a connection was refused, for the log: e.g. "64 connections from this address are in
// their handshake already". Precondition: `a` is not kAdmitted.
std::string DescribeRefusal(Admission a, const HandshakeLimits& limits);

}  // namespace dslaunch
