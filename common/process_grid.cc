#include "common/process_grid.h"

#include "common/check.h"

namespace dslaunch {

const char* GridAxisName(GridAxis axis) {
  switch (axis) {
    case GridAxis::kPipeline:
      return "pipeline";
    case GridAxis::kData:
      return "data";
    case GridAxis::kTensor:
      return "tensor";
  }
  return "?";
}

std::string DescribeGridShape(const GridShape& shape) {
  return std::to_string(shape.pipeline) + (shape.pipeline == 1 ? " stage x " : " stages x ") +
         std::to_string(shape.data) + " data x " + std::to_string(shape.tensor) + " tensor";
}

int GridCoordinates::Along(GridAxis axis) const {
  switch (axis) {
    case GridAxis::kPipeline:
      return pipeline;
    case GridAxis::kData:
      return data;
    case GridAxis::kTensor:
      return tensor;
  }
  return 0;
}

Result<ProcessGrid> ProcessGrid::Create(int world_size, int pipeline_stages, int tensor_size) {
  if (world_size < 1) return InvalidArgumentError("the world size must be at least 1, got " + std::to_string(world_size));
  if (pipeline_stages < 1) {
    return InvalidArgumentError("pipeline.stages must be at least 1, got " + std::to_string(pipeline_stages));
  }
  if (tensor_size < 1) {
    return InvalidArgumentError("tensor_parallel.autotp_size must be at least 1, got " + std::to_string(tensor_size));
  }
  const long model_ranks = static_cast<long>(pipeline_stages) * tensor_size;
  if (world_size % model_ranks != 0) {
    return InvalidArgumentError(
        "pipeline.stages " + std::to_string(pipeline_stages) + " x tensor_parallel.autotp_size " +
        std::to_string(tensor_size) + " = " + std::to_string(model_ranks) + " ranks per model copy does not divide the " +
        std::to_string(world_size) + " ranks of the job: give the job a multiple of " + std::to_string(model_ranks) +
        " ranks, or change the two sizes");
  }
  return ProcessGrid(GridShape{pipeline_stages, static_cast<int>(world_size / model_ranks), tensor_size});
}

ProcessGrid ProcessGrid::DataParallel(int world_size) {
  DSLAUNCH_CHECK(world_size >= 1) << "world size " << world_size;
  return ProcessGrid(GridShape{1, world_size, 1});
}

int ProcessGrid::Size(GridAxis axis) const {
  switch (axis) {
    case GridAxis::kPipeline:
      return shape_.pipeline;
    case GridAxis::kData:
      return shape_.data;
    case GridAxis::kTensor:
      return shape_.tensor;
  }
  return 1;
}

GridCoordinates ProcessGrid::CoordinatesOf(int rank) const {
  DSLAUNCH_CHECK(rank >= 0 && rank < world_size()) << "rank " << rank << " of " << world_size();
  GridCoordinates c;
  c.tensor = rank % shape_.tensor;
  c.data = (rank / shape_.tensor) % shape_.data;
  c.pipeline = rank / (shape_.tensor * shape_.data);
  return c;
}

int ProcessGrid::RankAt(const GridCoordinates& at) const {
  DSLAUNCH_CHECK(at.pipeline >= 0 && at.pipeline < shape_.pipeline && at.data >= 0 && at.data < shape_.data &&
                 at.tensor >= 0 && at.tensor < shape_.tensor)
      << "coordinates (" << at.pipeline << ", " << at.data << ", " << at.tensor << ") outside the grid";
  return (at.pipeline * shape_.data + at.data) * shape_.tensor + at.tensor;
}

std::vector<int> ProcessGrid::GroupOf(int rank, GridAxis axis) const {
  GridCoordinates c = CoordinatesOf(rank);
  std::vector<int> ranks;
  for (int i = 0; i < Size(axis); ++i) {
    switch (axis) {
      case GridAxis::kPipeline:
        c.pipeline = i;
        break;
      case GridAxis::kData:
        c.data = i;
        break;
      case GridAxis::kTensor:
        c.tensor = i;
        break;
    }
    ranks.push_back(RankAt(c));
  }
  return ranks;
}

int ProcessGrid::GroupIndex(int rank, GridAxis axis) const {
  const GridCoordinates c = CoordinatesOf(rank);
  switch (axis) {
    case GridAxis::kPipeline:  // the other two coordinates, data outer
      return c.data * shape_.tensor + c.tensor;
    case GridAxis::kData:
      return c.pipeline * shape_.tensor + c.tensor;
    case GridAxis::kTensor:
      return c.pipeline * shape_.data + c.data;
  }
  return 0;
}

int ProcessGrid::PreviousStage(int rank) const {
  GridCoordinates c = CoordinatesOf(rank);
  if (c.pipeline == 0) return -1;
  --c.pipeline;
  return RankAt(c);
}

int ProcessGrid::NextStage(int rank) const {
  GridCoordinates c = CoordinatesOf(rank);
  if (c.pipeline + 1 == shape_.pipeline) return -1;
  ++c.pipeline;
  return RankAt(c);
}

std::string ProcessGrid::Describe(int rank) const {
  const GridCoordinates c = CoordinatesOf(rank);
  return "stage " + std::to_string(c.pipeline) + "/" + std::to_string(shape_.pipeline) + ", data " +
         std::to_string(c.data) + "/" + std::to_string(shape_.data) + ", tensor " + std::to_string(c.tensor) + "/" +
         std::to_string(shape_.tensor);
}

}  // namespace dslaunch
