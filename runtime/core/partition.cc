#include "runtime/core/partition.h"

#include <algorithm>

#include "common/check.h"

namespace dslaunch::runtime {
namespace {

void CheckWorld(int world) { DSLAUNCH_CHECK(world >= 1) << "world size " << world; }

}  // namespace

ShardRange ShardFor(size_t numel, int world, int rank) {
  CheckWorld(world);
  DSLAUNCH_CHECK(rank >= 0 && rank < world) << "rank " << rank << " of world " << world;
  const size_t w = static_cast<size_t>(world);
  const size_t r = static_cast<size_t>(rank);
  const size_t base = numel / w;
  const size_t extra = numel % w;
  // Ranks before `r` hold base elements each plus one more for each of them below `extra`.
  const size_t begin = r * base + std::min(r, extra);
  const size_t size = base + (r < extra ? 1 : 0);
  return ShardRange{begin, begin + size};
}

std::vector<size_t> ShardCounts(size_t numel, int world) {
  CheckWorld(world);
  std::vector<size_t> counts(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) counts[static_cast<size_t>(r)] = ShardFor(numel, world, r).size();
  return counts;
}

size_t MaxShardSize(size_t numel, int world) {
  CheckWorld(world);
  const size_t w = static_cast<size_t>(world);
  return numel / w + (numel % w != 0 ? 1 : 0);
}

int OwnerOf(size_t index, size_t numel, int world) {
  CheckWorld(world);
  DSLAUNCH_CHECK(index < numel) << "index " << index << " outside buffer of " << numel;
  const size_t w = static_cast<size_t>(world);
  const size_t base = numel / w;
  const size_t extra = numel % w;
  // The first `extra` shards have base + 1 elements and end at index extra * (base + 1).
  const size_t long_span = extra * (base + 1);
  if (index < long_span) return static_cast<int>(index / (base + 1));
  return static_cast<int>(extra + (index - long_span) / base);
}

std::optional<ParamSlice> IntersectParam(size_t param_offset, size_t param_numel, ShardRange shard) {
  const size_t begin = std::max(param_offset, shard.begin);
  const size_t end = std::min(param_offset + param_numel, shard.end);
  if (begin >= end) return std::nullopt;
  return ParamSlice{begin - param_offset, begin - shard.begin, end - begin};
}

}  // namespace dslaunch::runtime
