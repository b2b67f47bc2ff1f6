// MlpModel: the `mlp` model of train.json (docs/model.md), as in DeepSpeed's FashionMNIST
// example: linear layers of the given widths (e.g. 784-300-10) with ReLU between them and none
// after the last, trained with softmax cross-entropy of the last layer's outputs against an
// integer class label. Forward and backward on CPU in fp32 through runtime/ops/cpu/ops.h.
//
// Parameters live outside the model, in the engine's flat buffers, reached group by group through
// ParameterAccess with the same protocol as GptModel: group i is linear layer i ("layers.<i>"),
// holding "layers.<i>.weight" [out][in] (decayed) then "layers.<i>.bias" [out] (not decayed).
// Activations are owned by the model and sized for at most max_batch rows.
// Not thread-safe; Forward then Backward, once per micro-step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "runtime/core/param_layout.h"
#include "runtime/core/parameter_access.h"

namespace dslaunch::runtime {

// The `mlp` model of train.json, typed; the parser fills it directly (docs/train-json.md, key
// "layers"): the input width, the hidden widths, the number of classes.
struct MlpConfig {
  std::vector<int> widths;
};

// An mlp deeper than this does not train without residual connections.
inline constexpr int kMaxMlpLayers = 1024;
// Keeps widths far from int overflow in products like width x batch.
inline constexpr int kMaxMlpWidth = 1 << 20;

// The one check of MlpConfig (the parser calls it): 2 to kMaxMlpLayers + 1 widths, each in
// [1, kMaxMlpWidth]. kInvalidArgument whose message starts with the train.json key,
// "model.layers: " or "model.layers[<i>]: ".
Status ValidateMlpConfig(const MlpConfig& config);

class MlpModel {
 public:
  // widths: at least 2 entries, all >= 1: the input width, the hidden widths, the number of
  // classes. max_batch >= 1. Violations are bugs (train.json parsing rejects them first) and
  // abort through DSLAUNCH_CHECK.
  MlpModel(std::vector<int> widths, int max_batch);

  // What a model of `widths` holds, computed without building it (runtime/train/memory_estimate.h),
  // in doubles: the elements of each parameter group (layer) in layout order, and the bytes of
  // the activations and scratch gradients the constructor allocates for max_batch.
  static std::vector<double> GroupSizes(const std::vector<int>& widths);
  static double ActivationBytes(const std::vector<int>& widths, int max_batch);
  // The same, measured on this model's buffers.
  size_t activation_bytes() const;

  const std::vector<int>& widths() const { return widths_; }
  int num_layers() const { return static_cast<int>(widths_.size()) - 1; }
  int input_width() const { return widths_.front(); }
  int num_classes() const { return widths_.back(); }
  const ParameterLayout& layout() const { return layout_; }

  // PyTorch nn.Linear's default initialisation into the full flat buffer (size layout().numel()):
  // every weight and bias of layer i uniform in [-1/sqrt(in_i), 1/sqrt(in_i)) (kaiming_uniform
  // with a = sqrt(5) gives that bound for the weight; the bias uses it by definition). Values are
  // drawn in layout order (layer 0 weight, layer 0 bias, layer 1 weight, ...) from one splitmix64
  // stream started at `seed`, each as (2u - 1) * bound with u = (top 24 bits) / 2^24: the same
  // values on every platform for a seed.
  void InitParameters(std::span<float> flat, uint64_t seed) const;
  // The same values' range [begin, begin + out.size()), computed without the others (one draw per
  // value: the stream is entered at the range's first).
  void InitRange(size_t begin, std::span<float> out, uint64_t seed) const;

  // Runs the model on inputs[b][input_width()] and returns the mean cross-entropy against
  // labels[b]. Preconditions (DSLAUNCH_CHECK): 1 <= b <= max_batch, every label in
  // [0, num_classes()) (validate data with CheckIdxDatasetFits first). Copies the inputs and
  // labels and keeps what Backward needs; acquires and releases each group once, first to last.
  float Forward(ParameterAccess& params, const float* inputs, const int* labels, int b);
  // Accumulates d(mean loss)/d(parameters) x loss_scale into params.Gradient(group), from the
  // last layer to the first: Acquire, use, Release, then GradientReady once per group.
  // Precondition: a Forward since the model was built.
  void Backward(ParameterAccess& params, float loss_scale);

  // Rows of the last Forward whose largest logit is at their label (ties: the first maximum).
  int correct() const { return correct_; }
  // The logits of the last Forward's rows, [b][num_classes()].
  std::span<const float> logits() const;

  // Model FLOPs per sample for forward + backward: 6 x matmul parameters (weights, not biases).
  double FlopsPerSample() const;

 private:
  std::vector<int> widths_;
  int max_batch_;
  ParameterLayout layout_;
  int b_ = 0;
  int correct_ = 0;
  std::vector<int> labels_;
  // acts_[i] is layer i's input: acts_[0] the copy of the inputs, acts_[i > 0] = ReLU(pre_[i - 1]).
  // pre_[i] is layer i's linear output; the last one is the logits.
  std::vector<std::vector<float>> acts_, pre_;
  std::vector<float> probs_, losses_;
  // Scratch gradients of activations, max_batch x the widest layer each.
  std::vector<float> dout_, din_;
};

}  // namespace dslaunch::runtime
