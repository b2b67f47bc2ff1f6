// ReplicaServer: where peer nodes' agents send this node their in-memory snapshots
// (docs/protocol.md, "Snapshot copies"). A TCP listener on the address this agent reaches the
// launcher from, and one thread per connection: each proves it holds the job's secret
// (common/auth/handshake.h, role snapshot-peer), then sends copies, which go into the
// ReplicaStore and are answered one by one. A connection that breaks the protocol, stalls inside
// a copy for kCopyReadTimeout, or sends a copy the store refuses is answered (when it can be) and
// closed; the copy it was sending is dropped, and nothing else is touched.
//
// Threading: Start and the destructor on the session's thread; the accept loop and the
// connections on threads of their own, joined by the destructor (which closes every socket).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/replica/replica_store.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "common/wire.h"

namespace dslaunch::agent::replica {

// A peer answers the challenge within one round trip; a silent one is closed after this.
inline constexpr std::chrono::seconds kPeerHandshakeTimeout{3};
// Inside a copy, the next bytes must come within this: a sender that stopped half-way is cut off.
inline constexpr std::chrono::seconds kCopyReadTimeout{60};

struct ServerOptions {
  std::string job_id;
  std::string secret;
  // A line about a refused connection or copy (thread-safe, called from the connection threads).
  std::function<void(const std::string&)> warn;
};

class ReplicaServer {
 public:
  // Listens on `ip`, port chosen by the kernel; copies go into `store`, which outlives the server.
  static Result<std::unique_ptr<ReplicaServer>> Start(const std::string& ip, ServerOptions options,
                                                      ReplicaStore& store);
  ~ReplicaServer();
  ReplicaServer(const ReplicaServer&) = delete;
  ReplicaServer& operator=(const ReplicaServer&) = delete;

  // "ip:port" ("[ip]:port" for IPv6), for the peers.
  const std::string& address() const { return address_; }

 private:
  ReplicaServer(ServerOptions options, ReplicaStore& store) : options_(std::move(options)), store_(store) {}
  void AcceptLoop();
  void Serve(int fd);
  Status Handshake(int fd, wire::FrameDecoder& in);
  Status ReceiveCopy(int fd, wire::FrameDecoder& in, const std::string& payload);

  const ServerOptions options_;
  ReplicaStore& store_;
  std::string address_;
  UniqueFd listener_;
  UniqueFd wake_;  // an eventfd: written once to stop the accept loop
  std::thread acceptor_;
  std::mutex mu_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  std::vector<int> open_;  // the connections' sockets, shut down by the destructor
};

}  // namespace dslaunch::agent::replica
