// The ring of peers for in-memory snapshot copies (docs/checkpoint.md, "Copies on peer nodes"):
// node r copies its snapshots to the nodes after it in node-rank order, wrapping around. Pure.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dslaunch::launcher {

// The SNAPSHOT_PEERS of node `node_rank` among the generation's members, whose snapshot addresses
// are `addresses` (node-rank order; "" for a node without one): the next members' addresses,
// wrapping around, never its own node, skipping empty ones, at most `limit`.
std::vector<std::string> SnapshotPeersOf(const std::vector<std::string>& addresses, size_t node_rank, size_t limit);

}  // namespace dslaunch::launcher
