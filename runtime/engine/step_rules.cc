#include "runtime/engine/step_rules.h"

#include <cmath>
#include <string>

namespace dslaunch::runtime {

std::vector<DecaySegment> OwnedSegments(const ParameterLayout& layout, const ShardRange& own) {
  std::vector<DecaySegment> segments;
  for (const auto& group : layout.groups()) {
    for (const auto& t : group.tensors) {
      if (auto slice = IntersectParam(t.offset, t.numel, own)) {
        segments.push_back({slice->shard_begin, slice->shard_begin + slice->numel, t.decay});
      }
    }
  }
  return segments;
}

Result<bool> DecideOnOverflow(Precision precision, LossScaler& scaler, StepStats& stats) {
  const bool overflow = !std::isfinite(stats.grad_norm);
  if (precision != Precision::kFp16) {
    if (!overflow) return false;
    return FailedPreconditionError("gradient norm is " + std::to_string(stats.grad_norm) + " in " +
                                   std::string(PrecisionName(precision)) +
                                   " training: the model diverged (lower the learning rate)");
  }
  StepDecision decision = scaler.Update(overflow);
  if (decision.skip_step || decision.change != ScaleChange::kNone) stats.scale_event = decision.Describe();
  if (decision.fatal) {
    return FailedPreconditionError(decision.Describe() +
                                   ": fp16 gradients overflow even at fp16.min_loss_scale; lower the learning "
                                   "rate, or use bf16");
  }
  stats.skipped = decision.skip_step;
  return decision.skip_step;
}

double UnscaleCoefficient(double gradient_clipping, const StepStats& stats) {
  double coef = 1.0 / stats.loss_scale;
  if (gradient_clipping > 0 && stats.grad_norm > gradient_clipping) {
    coef *= gradient_clipping / (stats.grad_norm + kClipEpsilon);
  }
  return coef;
}

}  // namespace dslaunch::runtime
