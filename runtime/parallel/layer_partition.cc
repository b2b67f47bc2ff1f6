#include "runtime/parallel/layer_partition.h"

#include <algorithm>
#include <cmath>

#include "common/text.h"

namespace dslaunch::runtime {
namespace {

// `count` blocks over `stages` stages, the first ones taking the remainder, from block `begin`.
void SplitEvenly(int begin, int count, int stages, std::vector<StageBlocks>* out) {
  if (stages == 0) return;
  const int base = count / stages, extra = count % stages;
  for (int s = 0; s < stages; ++s) {
    const int n = base + (s < extra ? 1 : 0);
    out->push_back(StageBlocks{begin, begin + n});
    begin += n;
  }
}

}  // namespace

const char* PartitionMethodName(PartitionMethod method) {
  return method == PartitionMethod::kUniform ? "uniform" : "parameters";
}

Result<PartitionMethod> ParsePartitionMethod(std::string_view text) {
  const std::string lower = LowerAscii(text);
  if (lower == "parameters") return PartitionMethod::kParameters;
  if (lower == "uniform") return PartitionMethod::kUniform;
  return InvalidArgumentError("'" + std::string(text) +
                              "' is not a partition method here: use \"parameters\" (balance the stages' "
                              "parameters, the default) or \"uniform\" (the same number of blocks per stage)");
}

Result<std::vector<StageBlocks>> PartitionLayers(const LayerWeights& weights, int stages, PartitionMethod method) {
  if (stages < 1) return InvalidArgumentError("pipeline.stages must be at least 1, got " + std::to_string(stages));
  if (stages > weights.blocks) {
    return InvalidArgumentError("pipeline.stages " + std::to_string(stages) + " is more than the model's " +
                                std::to_string(weights.blocks) +
                                " blocks (model.n_layer): each stage holds at least one block");
  }
  std::vector<StageBlocks> out;
  if (method == PartitionMethod::kUniform || stages == 1) {
    SplitEvenly(0, weights.blocks, stages, &out);
    return out;
  }
  // Every block weighs the same, so the stages between the two ends are best split evenly; what
  // is left to choose is how many blocks each end takes. Of the choices with the smallest largest
  // stage, the one whose stages differ least wins (then the fewest blocks at the first stage).
  const int middle_stages = stages - 2;
  int best_first = 0, best_last = 0;
  double best_worst = 0, best_spread = 0;
  for (int first = 1; first + (middle_stages > 0 ? middle_stages : 0) < weights.blocks; ++first) {
    for (int last = 1; first + last + middle_stages <= weights.blocks; ++last) {
      const int middle = weights.blocks - first - last;
      if (middle_stages == 0 && middle != 0) continue;
      const double a = weights.first_extra + first * weights.per_block;
      const double z = weights.last_extra + last * weights.per_block;
      double hi = std::max(a, z), lo = std::min(a, z);
      if (middle_stages > 0) {
        hi = std::max(hi, std::ceil(static_cast<double>(middle) / middle_stages) * weights.per_block);
        lo = std::min(lo, std::floor(static_cast<double>(middle) / middle_stages) * weights.per_block);
      }
      if (best_first == 0 || hi < best_worst || (hi == best_worst && hi - lo < best_spread)) {
        best_first = first;
        best_last = last;
        best_worst = hi;
        best_spread = hi - lo;
      }
    }
  }
  out.push_back(StageBlocks{0, best_first});
  SplitEvenly(best_first, weights.blocks - best_first - best_last, middle_stages, &out);
  out.push_back(StageBlocks{weights.blocks - best_last, weights.blocks});
  return out;
}

std::vector<double> StageParameters(const LayerWeights& weights, const std::vector<StageBlocks>& partition) {
  std::vector<double> out;
  for (size_t s = 0; s < partition.size(); ++s) {
    double p = weights.per_block * partition[s].count();
    if (s == 0) p += weights.first_extra;
    if (s + 1 == partition.size()) p += weights.last_extra;
    out.push_back(p);
  }
  return out;
}

}  // namespace dslaunch::runtime
