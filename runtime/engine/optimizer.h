// Optimizer updates on flat fp32 spans: the master weights a rank owns (all of them at ZeRO 0,
// its partition at ZeRO 1-3) and their gradients, with the optimizer states alongside. Pure
// arithmetic; the engine decides what each span covers.
//
// Formulas (docs/numerics.md), t = step number starting at 1, g already unscaled and clipped:
//   Adam (L2):  g' = g + wd p;  m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2;
//               p -= lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
//   AdamW:      p -= lr wd p (decoupled, before the Adam update with g' = g)
//   SGD:        g' = g + wd p;  buf = momentum buf + g' (buf = g' at the first step);  p -= lr buf
// Weight decay applies only to the segments marked `decay` (weights of linear and embedding
// layers; not biases or layer-norm parameters). Note that DeepSpeed's "Adam" is AdamW unless the
// config says "adam_w_mode": false: the engine picks the kind from
// OptimizerConfig::decoupled_weight_decay (runtime/config/train_config.h), not from the type name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace dslaunch::runtime {

enum class OptimizerKind { kAdam, kAdamW, kSgd };

struct OptimizerParams {
  OptimizerKind kind = OptimizerKind::kAdamW;
  double lr = 1e-3;  // the schedule overrides it per step
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double momentum = 0.0;  // SGD
};

// A run of elements [begin, end) of the spans given to Step, and whether weight decay applies.
struct DecaySegment {
  size_t begin = 0;
  size_t end = 0;
  bool decay = true;
};

// The optimizer states for `numel` master weights: Adam(W) keeps m and v (8 bytes per weight),
// SGD with momentum one buffer (4 bytes), plain SGD none.
struct OptimizerState {
  std::vector<float> m;
  std::vector<float> v;
  long step = 0;  // updates applied so far
  static OptimizerState For(const OptimizerParams& params, size_t numel);
  size_t bytes() const { return (m.size() + v.size()) * sizeof(float); }
};

// Applies one update with learning rate `lr` to `params` from `grads` (same size as the state),
// segment by segment. Increments state.step.
void OptimizerStep(const OptimizerParams& p, double lr, std::span<float> params, std::span<const float> grads,
                   const std::vector<DecaySegment>& segments, OptimizerState& state);

// The same update on a slice of the weights with the state's buffers borrowed: update number `t`
// (1-based; OptimizerStep passes ++state.step) applied to `params` from `grads`, with `m` (Adam's
// first moment, SGD's momentum buffer) and `v` (Adam's second moment) of the same length where
// the optimizer keeps them, empty otherwise. Each element's arithmetic depends on that element
// alone, so updating a buffer slice by slice gives the bits of one whole update.
void OptimizerUpdate(const OptimizerParams& p, double lr, int64_t t, std::span<float> params,
                     std::span<const float> grads, const std::vector<DecaySegment>& segments, std::span<float> m,
                     std::span<float> v);

// The parts of `segments` inside [begin, end), shifted to start at `begin`: the segments of a
// slice of the spans they describe.
std::vector<DecaySegment> SegmentsWithin(const std::vector<DecaySegment>& segments, size_t begin, size_t end);

}  // namespace dslaunch::runtime
