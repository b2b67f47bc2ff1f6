// SnapshotMemory: the memory in which a node's workers keep their in-memory snapshots
// (docs/checkpoint.md, "Snapshots in memory"). Two memory files (memfd_create) per local rank,
// created on the first start of that local rank and held by the agent for the whole job, so that
// a snapshot survives the worker that wrote it: the next generation's worker of the same local
// rank gets the same two files. A worker inherits them as descriptors, named by
// DSLAUNCH_SNAPSHOT_FDS ("7,8"); it sizes and fills them, the agent never reads them. They are
// freed with the agent (no file name, nothing left on the node). Not thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace dslaunch::agent {

class SnapshotMemory {
 public:
  // Slots per local rank: one is written while the other keeps the newest complete snapshot.
  static constexpr int kSlots = 2;

  // The descriptors of `local_rank`'s slots, created the first time (kInternal when memfd_create
  // fails, with errno's text).
  Result<std::vector<int>> For(int local_rank);

 private:
  std::map<int, std::vector<UniqueFd>> slots_;
};

// DSLAUNCH_SNAPSHOT_FDS's value for `fds`: "7,8".
std::string SnapshotFdsValue(const std::vector<int>& fds);

}  // namespace dslaunch::agent
