// The step's rules that every engine applies the same way, on the host, from the gradient norm:
// what an overflow does (fp16's loss scaler, or a failure for fp32 and bf16), the coefficient the
// gradient is multiplied by before the update (1 / loss scale and the clipping), and the weight-decay
// segments of an owned slice. ZeroEngine (zero_engine.cc) and the device engine
// (runtime/engine/cuda/device_engine.h) both call these, so that their steps decide alike.
#pragma once

#include <vector>

#include "common/status.h"
#include "runtime/core/param_layout.h"
#include "runtime/core/partition.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/engine_options.h"
#include "runtime/engine/loss_scaler.h"
#include "runtime/engine/optimizer.h"

namespace dslaunch::runtime {

// Added to the norm before dividing, as DeepSpeed and PyTorch's clip_grad_norm_ do.
inline constexpr double kClipEpsilon = 1e-6;

// Weight-decay segments of the owned slice `own` (relative to its start): the tensors of the
// layout that fall in it, decayed or not.
std::vector<DecaySegment> OwnedSegments(const ParameterLayout& layout, const ShardRange& own);

// Whether to skip the update, from stats.grad_norm: fp16 asks `scaler` about a non-finite norm
// (filling stats.skipped and stats.scale_event, and failing when it overflows at the minimum
// scale); fp32 and bf16 fail on one (the model diverged).
Result<bool> DecideOnOverflow(Precision precision, LossScaler& scaler, StepStats& stats);

// What the gradient is multiplied by before the update: 1 / loss scale, and the clipping to
// `gradient_clipping` (DeepSpeed's max_norm / (norm + 1e-6)) when it is > 0.
double UnscaleCoefficient(double gradient_clipping, const StepStats& stats);

}  // namespace dslaunch::runtime
