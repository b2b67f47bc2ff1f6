#include "launcher/start/ssh/start_tree.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

namespace dslaunch::launcher {
namespace {

constexpr int kLauncher = -1;

// Walks the tree as the launcher and the relays do; records each node's parent and depth.
void Walk(const std::vector<StartGroup>& groups, int parent, int depth, int fanout, std::vector<int>& parents,
          std::vector<int>& depths, std::vector<int>& starts) {
  for (const StartGroup& g : groups) {
    ++starts[g.begin];
    parents[g.begin] = parent;
    depths[g.begin] = depth;
    Walk(SplitIntoGroups(g.begin + 1, g.end, fanout), static_cast<int>(g.begin), depth + 1, fanout, parents, depths,
         starts);
  }
}

struct Tree {
  std::vector<int> parents, depths, starts;
  int max_depth = 0;
  std::vector<int> children;  // per node, and the launcher's at the end
};

Tree Layout(size_t nodes, int fanout, int threshold) {
  Tree t{std::vector<int>(nodes, -2), std::vector<int>(nodes, 0), std::vector<int>(nodes, 0), 0,
         std::vector<int>(nodes + 1, 0)};
  Walk(LauncherGroups(nodes, fanout, threshold), kLauncher, 1, fanout, t.parents, t.depths, t.starts);
  for (size_t i = 0; i < nodes; ++i) {
    t.max_depth = std::max(t.max_depth, t.depths[i]);
    ++t.children[t.parents[i] == kLauncher ? nodes : static_cast<size_t>(t.parents[i])];
  }
  return t;
}

TEST_CASE("SplitIntoGroups cuts a range into at most fanout contiguous groups, the larger ones first") {
  CHECK(SplitIntoGroups(0, 0, 4).empty());
  CHECK(SplitIntoGroups(3, 3, 4).empty());
  CHECK(SplitIntoGroups(0, 3, 4) == std::vector<StartGroup>{{0, 1}, {1, 2}, {2, 3}});
  CHECK(SplitIntoGroups(0, 10, 4) == std::vector<StartGroup>{{0, 3}, {3, 6}, {6, 8}, {8, 10}});
  CHECK(SplitIntoGroups(5, 9, 1) == std::vector<StartGroup>{{5, 9}});
  CHECK(SplitIntoGroups(0, 2, 0) == std::vector<StartGroup>{{0, 2}});  // fanout < 1 counts as 1
}

TEST_CASE("LauncherGroups starts every node directly up to the threshold, a tree past it") {
  CHECK(LauncherGroups(4, 2, 4).size() == 4);
  CHECK(LauncherGroups(4, 2, 3) == std::vector<StartGroup>{{0, 2}, {2, 4}});
  CHECK(LauncherGroups(300, 32, kSshDefaultTreeThreshold).size() == 32);
  CHECK(LauncherGroups(256, 32, kSshDefaultTreeThreshold).size() == 256);
  CHECK(LauncherGroups(0, 32, 0).empty());
}

TEST_CASE("The start tree starts every node exactly once, no parent has more than fanout children") {
  struct Case {
    size_t nodes;
    int fanout, threshold, depth;
  };
  for (const Case& c : {Case{1, 32, 256, 1}, Case{256, 32, 256, 1}, Case{257, 32, 256, 2}, Case{1056, 32, 0, 2},
                        Case{1057, 32, 0, 3}, Case{12000, 32, 256, 3}, Case{100000, 32, 256, 4},
                        Case{4, 1, 2, 4}, Case{4, 2, 2, 2}, Case{9, 3, 0, 2}, Case{13, 3, 0, 3}}) {
    CAPTURE(c.nodes);
    CAPTURE(c.fanout);
    Tree t = Layout(c.nodes, c.fanout, c.threshold);
    for (size_t i = 0; i < c.nodes; ++i) {
      CAPTURE(i);
      CHECK(t.starts[i] == 1);
      CHECK(t.children[i] <= c.fanout);
      // A parent precedes its children in node order (groups are contiguous, the head first).
      CHECK(t.parents[i] < static_cast<int>(i));
    }
    CHECK(t.children[c.nodes] <= std::max(c.fanout, c.nodes <= static_cast<size_t>(c.threshold) ? int(c.nodes) : 0));
    CHECK(t.max_depth == c.depth);
    CHECK(TreeDepth(c.nodes, c.nodes <= static_cast<size_t>(c.threshold) ? int(c.nodes) : c.fanout) == c.depth);
  }
}

TEST_CASE("A fanout of one past the threshold is a chain; a fanout of two two heads with one node each") {
  Tree chain = Layout(4, 1, 2);
  CHECK(chain.parents == std::vector<int>{kLauncher, 0, 1, 2});
  Tree two = Layout(4, 2, 2);
  CHECK(two.parents == std::vector<int>{kLauncher, 0, kLauncher, 2});
}

}  // namespace
}  // namespace dslaunch::launcher
