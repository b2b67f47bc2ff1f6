// The status server's bookkeeping of its connections (docs/observability.md, "Connections and
// deadlines"): a bound in total and per client (source address), and which connection gives way
// when a bound is reached. Pure: no sockets, no clock; the server asks Admit() for each accepted
// connection, closes the one Admit() names to evict, and says when a connection waits for a
// request (idle) and when it is being answered.
//
// Why evict rather than refuse: a connection that waits for a request holds nothing (a browser
// reopens a closed keep-alive connection and sends its GET again), while a full pool that refuses
// newcomers is the lockout a few slow or idle clients cause (slowloris). So a new connection takes
// the place of the one that has waited longest for a request: of its own client when that client is
// at its bound, else of any client. A legitimate request takes milliseconds to arrive, so it is
// never the oldest waiter while others sit idle. A connection being answered is never evicted; when
// every connection a bound counts is being answered, the newcomer is refused.
//
// The event streams' pool uses the same class and never marks a stream idle: a full stream pool
// refuses.
//
// Not thread-safe; the server uses it on its io_context's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

namespace dslaunch::launcher {

struct PoolLimits {
  size_t total = 0;       // connections in the pool at once
  size_t per_client = 0;  // of them from one source address
};

using ConnectionId = uint64_t;

struct PoolAdmission {
  enum class Kind {
    kAdmitted,
    kClientFull,  // the client has per_client connections, none of them idle
    kPoolFull,    // the pool has `total` connections, none of them idle
  };
  Kind kind = Kind::kAdmitted;
  ConnectionId id = 0;                  // kAdmitted: the new connection's
  std::optional<ConnectionId> evicted;  // kAdmitted in its place: the caller closes it
};

class ConnectionPool {
 public:
  explicit ConnectionPool(PoolLimits limits) : limits_(limits) {}

  // A new connection from `client` (an IP address). It starts idle (waiting for its first
  // request). When the client is at its bound, its own oldest idle connection is evicted; else when
  // the pool is full, the oldest idle one of any client; the evicted one is released here.
  // Refused (nothing counted) when the bound reached has no idle connection.
  PoolAdmission Admit(const std::string& client);

  // Whether `id` waits for a request (true: may be evicted; its wait starts now) or is being
  // answered (false). Ignored for an id that is not in the pool (evicted or released).
  void SetIdle(ConnectionId id, bool idle);

  // The connection closed. Ignored for an id that is not in the pool (an evicted one).
  void Release(ConnectionId id);

  size_t total() const { return entries_.size(); }
  size_t from(const std::string& client) const;
  const PoolLimits& limits() const { return limits_; }

 private:
  struct Entry {
    std::string client;
    bool idle = true;
    uint64_t idle_since = 0;  // a sequence number, not a time: orders the waits
  };
  // The idle connection that has waited longest, of `client` (or of anyone when null).
  std::optional<ConnectionId> OldestIdle(const std::string* client) const;

  PoolLimits limits_;
  std::map<ConnectionId, Entry> entries_;
  std::unordered_map<std::string, size_t> per_client_;  // only clients with a count above 0
  ConnectionId next_id_ = 1;
  uint64_t next_wait_ = 1;
};

// One line for the 503 a refused connection gets, `what` naming the pool's connections: "16
// connections from 127.0.0.1 are open and busy already (the status server's limit per client)".
// Precondition: not kAdmitted.
std::string DescribeRefusal(PoolAdmission::Kind kind, const PoolLimits& limits, const std::string& client,
                            const std::string& what);

}  // namespace dslaunch::launcher
