// Where a part of a model lies in the whole model (docs/checkpoint.md, "A model split over
// ranks"): a pipeline stage's blocks, a tensor rank's share of them. A part's flat buffer is a
// sequence of strided pieces of the whole model's flat buffer. Checkpoints record every rank's
// state in the whole model's coordinates, so that another grid, or a run without one, reads it
// back, and export reads it as the whole model. Pure.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/core/param_layout.h"
#include "runtime/core/partition.h"

namespace dslaunch::runtime {

// `count` runs of `run` elements of the whole model's flat buffer, run k starting at
// begin + k x stride. A single run (count 1) has stride 0.
struct WholePiece {
  uint64_t begin = 0;
  uint64_t stride = 0;
  uint64_t run = 0;  // > 0
  uint64_t count = 1;

  uint64_t numel() const { return run * count; }
  friend bool operator==(const WholePiece&, const WholePiece&) = default;
};

// A model part's place in the whole model.
struct PartPlacement {
  ParameterLayout whole;           // the whole model's parameters
  std::vector<WholePiece> pieces;  // the part's flat buffer [0, numel), in its order
  // Ranges of the part's flat buffer another rank saves: the tensors every tensor rank holds
  // whole, saved by the first tensor rank only (sorted, disjoint). Empty on the first.
  std::vector<ShardRange> saved_elsewhere;
  // The part's elements: its flat buffer's size.
  uint64_t numel() const;
};

// Appends `piece` to `pieces`, merged into the last one where it continues it: a run right after
// a single run, or a run of the same length one stride further.
void AppendPiece(std::vector<WholePiece>& pieces, const WholePiece& piece);

// The whole model's elements of part elements [range.begin, range.end), in the part's order:
// each piece cut to the range (a partial run, whole runs, a partial run), merged as AppendPiece
// merges. Precondition (checked): the range lies within the pieces' elements.
std::vector<WholePiece> PiecesOf(const std::vector<WholePiece>& pieces, ShardRange range);

// `range` without the ranges of `skip` (sorted, disjoint), in order, empty ones left out.
std::vector<ShardRange> Without(ShardRange range, const std::vector<ShardRange>& skip);

// Calls visit(whole_begin, count) for each run of `pieces` in order, rows of a strided piece one
// by one.
template <typename Visit>
void ForEachRun(const std::vector<WholePiece>& pieces, Visit&& visit) {
  for (const WholePiece& p : pieces) {
    for (uint64_t k = 0; k < p.count; ++k) visit(p.begin + k * p.stride, p.run);
  }
}

}  // namespace dslaunch::runtime
