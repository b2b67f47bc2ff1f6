// SnapshotReplication: this agent's part in keeping copies of in-memory snapshots on peer nodes
// (docs/checkpoint.md, "Copies on peer nodes"): the copies it holds for its peers (ReplicaStore),
// where they arrive (ReplicaServer), and the sending of its own node's snapshots (ReplicaSender).
// Started before the agent registers, since REGISTER names its address; it lives as long as the
// agent, across generations. Threading: every method on the session's thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/replica/replica_sender.h"
#include "agent/replica/replica_server.h"
#include "agent/replica/replica_store.h"
#include "common/status.h"

namespace dslaunch::agent::replica {

struct ReplicationOptions {
  std::string job_id;
  std::string secret;
  std::string prefix;  // "dslaunch-agent[node 1]: ", before each line it writes to stderr
};

class SnapshotReplication {
 public:
  // Listens on the address this node reaches the launcher's `endpoint` (host:port) from, which
  // peers reach it by too. An endpoint that is not host:port (unix:PATH) is kUnavailable: no copies.
  static Result<std::unique_ptr<SnapshotReplication>> Start(const std::string& endpoint, ReplicationOptions options);

  // Where peers send copies: "ip:port".
  const std::string& address() const { return server_->address(); }
  ReplicaStore& store() { return store_; }
  ReplicaSender& sender() { return *sender_; }

 private:
  SnapshotReplication() = default;

  ReplicaStore store_;  // declared first: the threads that fill it end before it does
  std::unique_ptr<ReplicaServer> server_;
  std::unique_ptr<ReplicaSender> sender_;
};

}  // namespace dslaunch::agent::replica
