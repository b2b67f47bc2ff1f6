#include "agent/replica/snapshot_replication.h"

#include <cstdio>

#include "common/endpoint/endpoint_client.h"
#include "common/route.h"

namespace dslaunch::agent::replica {

Result<std::unique_ptr<SnapshotReplication>> SnapshotReplication::Start(const std::string& endpoint,
                                                                        ReplicationOptions options) {
  if (UnixSocketPath(endpoint)) return UnavailableError("the launcher is reached over a Unix socket");
  DSLAUNCH_ASSIGN_OR_RETURN(const std::string ip, SourceAddressToward(endpoint));
  auto warn = [prefix = options.prefix](const std::string& line) {
    std::fprintf(stderr, "%s%s\n", prefix.c_str(), line.c_str());  // one write per line
  };
  std::unique_ptr<SnapshotReplication> r(new SnapshotReplication());
  DSLAUNCH_ASSIGN_OR_RETURN(r->server_, ReplicaServer::Start(ip, ServerOptions{options.job_id, options.secret, warn},
                                                             r->store_));
  r->sender_ = std::make_unique<ReplicaSender>(SenderOptions{options.job_id, options.secret, warn});
  return r;
}

}  // namespace dslaunch::agent::replica
