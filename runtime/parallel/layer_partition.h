// Which transformer blocks each pipeline stage holds (docs/parallelism.md, "Stages"). Pure.
//
// The blocks are split into contiguous runs, one per stage, each of at least one block. The first
// stage also holds the embeddings, the last the final layer norm and the language-model head
// (tied to the token embedding, so the last stage keeps its own copy of it: docs/parallelism.md,
// "Tied embeddings").
//   kUniform:    the same number of blocks per stage, the first stages taking one more where
//                they do not divide (DeepSpeed's partition_method "uniform").
//   kParameters: the largest stage's parameter count as small as it can be, counting the
//                embeddings on the first stage and the head on the last (DeepSpeed's default,
//                "parameters"); of the splits that reach it, the one whose stages differ least.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dslaunch::runtime {

enum class PartitionMethod { kParameters, kUniform };

// "parameters", "uniform".
const char* PartitionMethodName(PartitionMethod method);
// The train.json value (case-insensitive, as DeepSpeed reads it); kInvalidArgument naming the two
// methods for anything else.
Result<PartitionMethod> ParsePartitionMethod(std::string_view text);

struct StageBlocks {
  int begin = 0;  // first block
  int end = 0;    // one past the last
  int count() const { return end - begin; }
  friend bool operator==(const StageBlocks&, const StageBlocks&) = default;
};

// What the partition weighs: every block the same, and the extra parameters of the two ends.
struct LayerWeights {
  int blocks = 0;
  double per_block = 0;    // parameters of one block
  double first_extra = 0;  // the embeddings (wte, wpe)
  double last_extra = 0;   // the final layer norm and the tied head's copy of wte
};

// The stages' blocks. kInvalidArgument, naming pipeline.stages, when there are more stages than
// blocks (or fewer than one).
Result<std::vector<StageBlocks>> PartitionLayers(const LayerWeights& weights, int stages, PartitionMethod method);

// The parameters each stage holds under `partition`.
std::vector<double> StageParameters(const LayerWeights& weights, const std::vector<StageBlocks>& partition);

}  // namespace dslaunch::runtime
