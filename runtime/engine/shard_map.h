// ShardMap: where the owned slice of the flat parameter buffer lies on every rank, and the counts
// of a collective over a range of it. The engine's parts share one.
//
// With the optimizer state partitioned (ZeRO 1-3) rank r owns ShardFor(numel, world, r); without
// (ZeRO 0) every rank owns the whole buffer. The counts of a collective are always those of the
// partition (only stages 1-3 make reduce-scatters and all-gathers).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "runtime/core/partition.h"

namespace dslaunch::runtime {

class ShardMap {
 public:
  ShardMap(size_t numel, int world, int rank, bool partitioned) : numel_(numel), partitioned_(partitioned) {
    for (int r = 0; r < world; ++r) shards_.push_back(ShardFor(numel, world, r));
    own_ = partitioned ? shards_[static_cast<size_t>(rank)] : ShardRange{0, numel};
  }

  size_t numel() const { return numel_; }
  // Whether the owned slice is a partition (ZeRO 1-3), so that updates are all-gathered.
  bool partitioned() const { return partitioned_; }
  // The slice of master weights (and optimizer state) this rank updates: all of them at ZeRO 0.
  const ShardRange& own() const { return own_; }

  // Elements of [lo, hi) in each rank's partition: the counts of a collective over that range.
  std::vector<size_t> Counts(size_t lo, size_t hi) const {
    std::vector<size_t> counts;
    for (const ShardRange& s : shards_) {
      const size_t b = std::max(lo, s.begin), e = std::min(hi, s.end);
      counts.push_back(e > b ? e - b : 0);
    }
    return counts;
  }
  // This rank's part of [lo, hi), as a range of flat indices (empty, at its clamped start, when
  // they do not overlap).
  ShardRange OwnPart(size_t lo, size_t hi) const {
    const size_t b = std::max(lo, own_.begin), e = std::min(hi, own_.end);
    return e > b ? ShardRange{b, e} : ShardRange{b, b};
  }

 private:
  size_t numel_;
  bool partitioned_;
  std::vector<ShardRange> shards_;  // every rank's partition
  ShardRange own_;
};

}  // namespace dslaunch::runtime
