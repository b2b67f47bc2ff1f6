// The communicators of a process grid over Gloo (docs/parallelism.md, "The grid"): one per axis of
// the grid for this rank, each a Gloo group of its own formed through the store.
//
// Every rank forms its groups in the same order (pipeline, data, tensor), and the groups along one
// axis are disjoint, so forming them cannot wait on each other. The group along an axis gets its
// own Gloo context id, 1 + axis x world + the group's index (common/process_grid.h,
// GroupIndex), so its store keys ("gloo/ctx<id>/") are the group's alone; the world communicator
// keeps `options.context_id` (0).
#pragma once

#include <memory>

#include "common/status.h"
#include "common/store/store_client.h"
#include "runtime/comm/gloo/communicator.h"
#include "common/process_grid.h"

namespace dslaunch::runtime {

struct GridCommunicators {
  std::unique_ptr<GlooCommunicator> pipeline;  // this rank's pipeline group: the stages, in order
  std::unique_ptr<GlooCommunicator> data;      // the data-parallel copies of this rank's part
  std::unique_ptr<GlooCommunicator> tensor;    // the tensor-parallel group
};

// The Gloo context id of `rank`'s group along `axis`.
int GridContextId(const ProcessGrid& grid, int rank, GridAxis axis);

// Forms `rank`'s three groups. A group of one rank is formed too (its collectives are local), so
// that every part of the runtime can take the three. Errors are GlooCommunicator::Create's,
// with the axis named.
Result<GridCommunicators> CreateGridCommunicators(StoreClient& store, const ProcessGrid& grid, int rank,
                                                  const GlooOptions& options);

}  // namespace dslaunch::runtime
