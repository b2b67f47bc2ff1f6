// The start tree, the pure part (docs/ssh.md, "The start tree"): which node starts which.
//
// Up to the threshold, the launcher starts every node itself (at most fanout at once). Past it,
// the nodes (in node-rank order) are cut into at most `fanout` contiguous groups of near-equal
// size; the first node of a group is its head, started by the launcher, and the rest of the group
// is the head's subtree, which the head's start relay cuts the same way. A group of one is a node
// started directly. So every node is started exactly once, by one parent, and the depth is
// about log_fanout(nodes).
#pragma once

#include <cstddef>
#include <vector>

namespace dslaunch::launcher {

// Past this many nodes the launcher starts a tree (--ssh_tree_threshold). Flat, 256 nodes are 8
// rounds of 32 handshakes (1-3 s) and 256 sessions and threads in the launcher, which it holds
// easily; a tree adds a hop (a head's login and relay start) and needs the SSH key and
// known_hosts readable on the heads, so it is worth it only where flat rounds add up.
inline constexpr int kSshDefaultTreeThreshold = 256;

// A group of node indexes [begin, end): node `begin` is the head, (begin, end) its subtree.
struct StartGroup {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
  bool operator==(const StartGroup&) const = default;
};

// Cuts [begin, end) into min(fanout, end - begin) contiguous groups, the first (n % groups) one
// larger than the rest. fanout < 1 counts as 1. Empty range: no groups.
std::vector<StartGroup> SplitIntoGroups(size_t begin, size_t end, int fanout);

// The launcher's groups for `nodes` nodes: one group per node when nodes <= threshold (flat),
// else SplitIntoGroups(0, nodes, fanout).
std::vector<StartGroup> LauncherGroups(size_t nodes, int fanout, int threshold);

// Hops from the launcher to the deepest node when a subtree of `nodes` is cut with SplitIntoGroups
// at every level: 1 for a flat start (every group of one), 0 for no nodes.
int TreeDepth(size_t nodes, int fanout);

}  // namespace dslaunch::launcher
