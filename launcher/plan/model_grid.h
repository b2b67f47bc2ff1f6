// The process grid of a train.json job, for the printed plan (`--dry-run`; docs/launch-plan.md,
// "Model parallelism"): its pipeline.stages and tensor_parallel.autotp_size, the grid they make of
// the plan's world (common/process_grid.h), and so each rank's stage, data and tensor coordinates.
// The launcher reads only these two keys; the whole file is the runtime's to check when the
// workers start (docs/train-json.md). Pure: files come through `read`.
#pragma once

#include <functional>
#include <string>

#include "common/status.h"
#include "launcher/plan/launch_plan.h"

namespace dslaunch::launcher {

struct ModelGridSizes {
  int pipeline_stages = 1;  // pipeline.stages
  int tensor = 1;           // tensor_parallel.autotp_size (DeepSpeed's 0, off, is 1)
  bool split() const { return pipeline_stages * tensor > 1; }
};

using ReadText = std::function<Result<std::string>(const std::string& path)>;

// The sizes the train.json at `path` asks for: its own keys, else its "deepspeed_config" file's
// (train.json's keys override the referenced file's, as in the runtime). kInvalidArgument naming
// the file and JSON path for text that is not a JSON object or a size that is not an integer >= 1
// (autotp_size >= 0); the read error, with the file, when a file cannot be read.
Result<ModelGridSizes> ReadModelGridSizes(const std::string& path, const ReadText& read);

// Sets plan.grid from `sizes` over plan.world_size when they split the model, or plan.grid_error
// when the sizes could not be read or do not fit the world (the grid's own message, naming the
// keys). Sizes that split nothing leave both empty.
void SetModelGrid(LaunchPlan& plan, const Result<ModelGridSizes>& sizes);

}  // namespace dslaunch::launcher
