#include "launcher/start/ssh/start_tree.h"

#include <algorithm>

namespace dslaunch::launcher {

std::vector<StartGroup> SplitIntoGroups(size_t begin, size_t end, int fanout) {
  std::vector<StartGroup> groups;
  if (end <= begin) return groups;
  const size_t n = end - begin;
  const size_t count = std::min(n, static_cast<size_t>(std::max(fanout, 1)));
  const size_t base = n / count, larger = n % count;
  groups.reserve(count);
  size_t at = begin;
  for (size_t g = 0; g < count; ++g) {
    const size_t size = base + (g < larger ? 1 : 0);
    groups.push_back({at, at + size});
    at += size;
  }
  return groups;
}

std::vector<StartGroup> LauncherGroups(size_t nodes, int fanout, int threshold) {
  if (nodes <= static_cast<size_t>(std::max(threshold, 0))) return SplitIntoGroups(0, nodes, static_cast<int>(nodes));
  return SplitIntoGroups(0, nodes, fanout);
}

int TreeDepth(size_t nodes, int fanout) {
  if (nodes == 0) return 0;
  // The largest group is the first; its head is one hop, its subtree the rest.
  const StartGroup first = SplitIntoGroups(0, nodes, fanout).front();
  return 1 + TreeDepth(first.size() - 1, fanout);
}

}  // namespace dslaunch::launcher
