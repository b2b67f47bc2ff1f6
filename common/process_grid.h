// ProcessGrid: the world split into pipeline-, data- and tensor-parallel groups (docs/parallelism.md,
// "The grid"). Pure arithmetic on ranks, shared by the runtime (its groups) and the launcher (each
// rank's place in `--dry-run`).
//
// The axes are ordered as DeepSpeed's PipeModelDataParallelTopology orders them: pipeline
// outermost, then data, tensor innermost, so
//   rank = (pipeline x data_size + data) x tensor_size + tensor.
// Ranks are numbered node by node (docs/launch-plan.md), so a tensor group (consecutive ranks)
// stays on one node whenever tensor_size divides the ranks per node, and the data-parallel copies
// of a stage sit on the next node over.
//
// A group along an axis is the set of ranks that differ only in that axis' coordinate, listed in
// that coordinate's order: a rank's place in the list is its rank within the group's
// communicator.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace dslaunch {

enum class GridAxis { kPipeline, kData, kTensor };

// "pipeline", "data", "tensor".
const char* GridAxisName(GridAxis axis);

struct GridShape {
  int pipeline = 1;
  int data = 1;
  int tensor = 1;
  int world() const { return pipeline * data * tensor; }
  friend bool operator==(const GridShape&, const GridShape&) = default;
};

// "2 stages x 2 data x 2 tensor", "1 stage x 4 data x 2 tensor": the grid as `--dry-run`, the
// resume line and the status page write it.
std::string DescribeGridShape(const GridShape& shape);

struct GridCoordinates {
  int pipeline = 0;
  int data = 0;
  int tensor = 0;
  int Along(GridAxis axis) const;
  friend bool operator==(const GridCoordinates&, const GridCoordinates&) = default;
};

class ProcessGrid {
 public:
  // The grid of `world_size` ranks with `pipeline_stages` stages and tensor groups of
  // `tensor_size`; the data-parallel size is what is left. kInvalidArgument, naming the train.json
  // keys, when a size is below 1 or pipeline_stages x tensor_size does not divide world_size.
  static Result<ProcessGrid> Create(int world_size, int pipeline_stages, int tensor_size);
  // The trivial grid: every rank data-parallel.
  static ProcessGrid DataParallel(int world_size);
  ProcessGrid() = default;  // one rank

  const GridShape& shape() const { return shape_; }
  int world_size() const { return shape_.world(); }
  int Size(GridAxis axis) const;

  // Preconditions (checked): 0 <= rank < world_size(), coordinates within the shape.
  GridCoordinates CoordinatesOf(int rank) const;
  int RankAt(const GridCoordinates& at) const;

  // The ranks of `rank`'s group along `axis`, in the order of that axis' coordinate.
  std::vector<int> GroupOf(int rank, GridAxis axis) const;
  // Which group along `axis` `rank` is in: 0 .. GroupCount(axis) - 1, the same for every member.
  int GroupIndex(int rank, GridAxis axis) const;
  int GroupCount(GridAxis axis) const { return world_size() / Size(axis); }

  // The same rank one pipeline stage earlier or later (same data and tensor coordinates), or -1
  // at the first or last stage.
  int PreviousStage(int rank) const;
  int NextStage(int rank) const;

  // "stage 1/2, data 0/2, tensor 1/2": a rank's coordinates for logs, --dry-run and the page.
  std::string Describe(int rank) const;

 private:
  explicit ProcessGrid(GridShape shape) : shape_(shape) {}
  GridShape shape_;
};

}  // namespace dslaunch
