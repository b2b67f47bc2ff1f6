// Partitioning of flat buffers across data-parallel ranks, for ZeRO stages 1-3. Pure arithmetic;
// rule and examples: docs/numerics.md, "Partitioning".
//
// Rule: a buffer of `numel` elements is split into `world` contiguous, ordered shards; with
// q = numel / world and r = numel % world, ranks 0..r-1 own q + 1 elements and ranks r.. own q.
// Shards differ in size by at most one, cover the buffer exactly, and need no padding of the
// buffer itself. Collectives that need equal counts (a plain reduce-scatter or all-gather) stage
// through buffers of MaxShardSize() elements per rank and copy ShardFor()'s real extent in or out.
//
// We do not use DeepSpeed's padding approach (round numel up to a multiple of world and give the
// padding to the last ranks) because it leaves the last ranks with up to world - 1 fewer real
// elements, and a rank can own nothing at all for small buffers; the balanced rule bounds the
// imbalance by one element and keeps per-rank memory within one element of numel / world.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

namespace dslaunch::runtime {

// The half-open range [begin, end) of flat-buffer indices a rank owns.
struct ShardRange {
  size_t begin = 0;
  size_t end = 0;

  size_t size() const { return end - begin; }
  bool empty() const { return begin == end; }
  bool Contains(size_t index) const { return index >= begin && index < end; }
  friend bool operator==(const ShardRange&, const ShardRange&) = default;
};

// The shard of `rank` in a buffer of `numel` elements split across `world` ranks (rule above).
// Preconditions (DSLAUNCH_CHECKed, they are bugs): world >= 1, 0 <= rank < world.
ShardRange ShardFor(size_t numel, int world, int rank);

// ShardFor(numel, world, r).size() for r = 0..world-1: the counts for reduce-scatter-v and
// all-gather-v. Same preconditions.
std::vector<size_t> ShardCounts(size_t numel, int world);

// The largest shard: ceil(numel / world). Per-rank size of equal-count staging buffers.
size_t MaxShardSize(size_t numel, int world);

// The rank whose shard holds flat index `index`. Precondition: index < numel.
int OwnerOf(size_t index, size_t numel, int world);

// The part of one parameter that lies inside a shard. A parameter occupies
// [param_offset, param_offset + param_numel) of the flat buffer.
struct ParamSlice {
  size_t param_begin = 0;   // first owned element, counted from the parameter's start
  size_t shard_begin = 0;   // where that element sits, counted from the shard's start
  size_t numel = 0;         // owned elements (> 0)

  friend bool operator==(const ParamSlice&, const ParamSlice&) = default;
};

// The slice of the parameter at [param_offset, param_offset + param_numel) owned by `shard`, or
// nullopt when they do not overlap (including an empty parameter or an empty shard).
std::optional<ParamSlice> IntersectParam(size_t param_offset, size_t param_numel, ShardRange shard);

}  // namespace dslaunch::runtime
