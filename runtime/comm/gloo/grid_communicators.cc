#include "runtime/comm/gloo/grid_communicators.h"

#include <algorithm>
#include <string>
#include <vector>

namespace dslaunch::runtime {
namespace {

int AxisIndex(GridAxis axis) {
  switch (axis) {
    case GridAxis::kPipeline:
      return 0;
    case GridAxis::kData:
      return 1;
    case GridAxis::kTensor:
      return 2;
  }
  return 0;
}

Result<std::unique_ptr<GlooCommunicator>> FormGroup(StoreClient& store, const ProcessGrid& grid, int rank,
                                                    GridAxis axis, GlooOptions options) {
  const std::vector<int> members = grid.GroupOf(rank, axis);
  const int group_rank = static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
  options.context_id = GridContextId(grid, rank, axis);
  auto comm = GlooCommunicator::Create(store, group_rank, static_cast<int>(members.size()), options);
  if (!comm.ok()) {
    return Status(comm.status().code(), std::string(GridAxisName(axis)) + "-parallel group " +
                                            std::to_string(grid.GroupIndex(rank, axis)) + ": " +
                                            comm.status().message());
  }
  return comm;
}

}  // namespace

int GridContextId(const ProcessGrid& grid, int rank, GridAxis axis) {
  return 1 + AxisIndex(axis) * grid.world_size() + grid.GroupIndex(rank, axis);
}

Result<GridCommunicators> CreateGridCommunicators(StoreClient& store, const ProcessGrid& grid, int rank,
                                                  const GlooOptions& options) {
  GridCommunicators comms;
  DSLAUNCH_ASSIGN_OR_RETURN(comms.pipeline, FormGroup(store, grid, rank, GridAxis::kPipeline, options));
  DSLAUNCH_ASSIGN_OR_RETURN(comms.data, FormGroup(store, grid, rank, GridAxis::kData, options));
  DSLAUNCH_ASSIGN_OR_RETURN(comms.tensor, FormGroup(store, grid, rank, GridAxis::kTensor, options));
  return comms;
}

}  // namespace dslaunch::runtime
