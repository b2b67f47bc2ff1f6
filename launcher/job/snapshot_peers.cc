#include "launcher/job/snapshot_peers.h"

namespace dslaunch::launcher {

std::vector<std::string> SnapshotPeersOf(const std::vector<std::string>& addresses, size_t node_rank, size_t limit) {
  std::vector<std::string> peers;
  const size_t n = addresses.size();
  for (size_t step = 1; step < n && peers.size() < limit; ++step) {
    const std::string& next = addresses[(node_rank + step) % n];
    if (!next.empty()) peers.push_back(next);
  }
  return peers;
}

}  // namespace dslaunch::launcher
