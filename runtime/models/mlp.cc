#include "runtime/models/mlp.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "common/check.h"
#include "runtime/core/random.h"
#include "runtime/ops/cpu/ops.h"

namespace dslaunch::runtime {
namespace {

// Uniform in [-bound, bound): 24 random bits are exactly what a float's significand holds, so
// every value is representable and the result is platform-independent.
void FillUniform(float* out, size_t n, float bound, uint64_t& state) {
  for (size_t i = 0; i < n; ++i) out[i] = (2.0f * UniformFloat(state) - 1.0f) * bound;
}

}  // namespace

Status ValidateMlpConfig(const MlpConfig& config) {
  const size_t n = config.widths.size();
  if (n < 2) return InvalidArgumentError("model.layers: needs at least 2 widths (input and output)");
  if (n > static_cast<size_t>(kMaxMlpLayers) + 1) {
    return InvalidArgumentError("model.layers: " + std::to_string(n) + " widths; at most " +
                                std::to_string(kMaxMlpLayers + 1) + " (" + std::to_string(kMaxMlpLayers) + " layers)");
  }
  for (size_t i = 0; i < n; ++i) {
    if (config.widths[i] < 1 || config.widths[i] > kMaxMlpWidth) {
      return InvalidArgumentError("model.layers[" + std::to_string(i) + "]: must be in [1, " +
                                  std::to_string(kMaxMlpWidth) + "], got " + std::to_string(config.widths[i]));
    }
  }
  return Status::Ok();
}

MlpModel::MlpModel(std::vector<int> widths, int max_batch) : widths_(std::move(widths)), max_batch_(max_batch) {
  DSLAUNCH_CHECK(widths_.size() >= 2) << "an mlp needs at least 2 widths (input and classes), got "
                                      << widths_.size();
  DSLAUNCH_CHECK(max_batch_ >= 1) << "max_batch " << max_batch_;
  for (int w : widths_) DSLAUNCH_CHECK(w >= 1) << "mlp width " << w;
  const int layers = num_layers();
  const size_t rows = static_cast<size_t>(max_batch_);
  int widest = 0;
  acts_.resize(layers);
  pre_.resize(layers);
  for (int i = 0; i < layers; ++i) {
    const int in = widths_[i], out = widths_[i + 1];
    const std::string name = "layers." + std::to_string(i);
    layout_.BeginGroup(name);
    layout_.Add(name + ".weight", {out, in}, true);
    layout_.Add(name + ".bias", {out}, false);
    acts_[i].resize(rows * in);
    pre_[i].resize(rows * out);
    widest = std::max({widest, in, out});
  }
  labels_.resize(rows);
  probs_.resize(rows * num_classes());
  losses_.resize(rows);
  dout_.resize(rows * widest);
  din_.resize(rows * widest);
}

std::vector<double> MlpModel::GroupSizes(const std::vector<int>& widths) {
  std::vector<double> sizes;
  for (size_t i = 0; i + 1 < widths.size(); ++i) sizes.push_back((static_cast<double>(widths[i]) + 1.0) * widths[i + 1]);
  return sizes;
}

double MlpModel::ActivationBytes(const std::vector<int>& widths, int max_batch) {
  if (widths.size() < 2) return 0.0;
  const double rows = max_batch;
  double floats = 0.0, widest = 0.0;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    floats += rows * widths[i] + rows * widths[i + 1];  // acts_, pre_
    widest = std::max({widest, static_cast<double>(widths[i]), static_cast<double>(widths[i + 1])});
  }
  floats += rows * widths.back() + rows + 2 * rows * widest;  // probs_, losses_, dout_, din_
  return floats * sizeof(float) + rows * sizeof(int);         // labels_
}

size_t MlpModel::activation_bytes() const {
  size_t floats = probs_.size() + losses_.size() + dout_.size() + din_.size();
  for (size_t i = 0; i < acts_.size(); ++i) floats += acts_[i].size() + pre_[i].size();
  return floats * sizeof(float) + labels_.size() * sizeof(int);
}

void MlpModel::InitParameters(std::span<float> flat, uint64_t seed) const {
  DSLAUNCH_CHECK(flat.size() == layout_.numel()) << "flat buffer of " << flat.size() << " for " << layout_.numel();
  InitRange(0, flat, seed);
}

void MlpModel::InitRange(size_t begin, std::span<float> out, uint64_t seed) const {
  const size_t end = begin + out.size();
  DSLAUNCH_CHECK(begin <= end && end <= layout_.numel()) << "range [" << begin << ", " << end << ") of " << layout_.numel();
  for (int i = 0; i < num_layers(); ++i) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(widths_[i]));
    for (const TensorInfo& t : layout_.groups()[i].tensors) {
      const size_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.numel);
      if (lo >= hi) continue;
      // Value k of the model is draw k of the stream (one draw per value, in layout order).
      uint64_t state = SkipSplitMix64(seed, lo);
      FillUniform(out.data() + (lo - begin), hi - lo, bound, state);
    }
  }
}

float MlpModel::Forward(ParameterAccess& params, const float* inputs, const int* labels, int b) {
  DSLAUNCH_CHECK(b >= 1 && b <= max_batch_) << "batch " << b << " outside [1, " << max_batch_ << "]";
  const int classes = num_classes();
  for (int r = 0; r < b; ++r) {
    DSLAUNCH_CHECK(labels[r] >= 0 && labels[r] < classes)
        << "label " << labels[r] << " of row " << r << " outside [0, " << classes << ")";
  }
  b_ = b;
  std::copy(labels, labels + b, labels_.begin());
  std::copy(inputs, inputs + static_cast<size_t>(b) * input_width(), acts_[0].begin());

  const int layers = num_layers();
  for (int i = 0; i < layers; ++i) {
    const int in = widths_[i], out = widths_[i + 1];
    std::span<const float> g = params.Acquire(i);
    const float* weight = g.data();
    const float* bias = g.data() + static_cast<size_t>(out) * in;
    ops::LinearForward(pre_[i].data(), acts_[i].data(), weight, bias, b, in, out);
    params.Release(i);
    if (i + 1 < layers) ops::ReluForward(acts_[i + 1].data(), pre_[i].data(), static_cast<long>(b) * out);
  }

  const float* logits = pre_[layers - 1].data();
  ops::CrossEntropyForward(losses_.data(), probs_.data(), logits, labels_.data(), b, classes);
  double sum = 0;
  correct_ = 0;
  for (int r = 0; r < b; ++r) {
    sum += losses_[r];
    const float* row = logits + static_cast<size_t>(r) * classes;
    if (std::max_element(row, row + classes) - row == labels_[r]) ++correct_;
  }
  return static_cast<float>(sum / b);
}

void MlpModel::Backward(ParameterAccess& params, float loss_scale) {
  DSLAUNCH_CHECK(b_ > 0) << "Backward before Forward";
  const int b = b_, layers = num_layers();
  auto zero = [](std::vector<float>& buf, size_t count) { std::fill(buf.begin(), buf.begin() + count, 0.0f); };

  // dout_ holds d(loss)/d(pre_[i]) for the layer being processed; mean loss: each row's share is 1/b.
  zero(dout_, static_cast<size_t>(b) * num_classes());
  ops::CrossEntropyBackward(dout_.data(), probs_.data(), labels_.data(), loss_scale / b, b, num_classes());
  for (int i = layers - 1; i >= 0; --i) {
    const int in = widths_[i], out = widths_[i + 1];
    std::span<const float> g = params.Acquire(i);
    std::span<float> dg = params.Gradient(i);
    const size_t bias_offset = static_cast<size_t>(out) * in;
    // The first layer's input gradient is not needed.
    float* din = i > 0 ? din_.data() : nullptr;
    if (din != nullptr) zero(din_, static_cast<size_t>(b) * in);
    ops::LinearBackward(din, dg.data(), dg.data() + bias_offset, dout_.data(), acts_[i].data(), g.data(), b, in, out);
    params.Release(i);
    params.GradientReady(i);
    if (i > 0) {
      // d(pre_[i - 1]) = d(acts_[i]) where the ReLU passed its input.
      zero(dout_, static_cast<size_t>(b) * in);
      ops::ReluBackward(dout_.data(), din_.data(), pre_[i - 1].data(), static_cast<long>(b) * in);
    }
  }
}

std::span<const float> MlpModel::logits() const {
  return {pre_.back().data(), static_cast<size_t>(b_) * num_classes()};
}

double MlpModel::FlopsPerSample() const {
  // 2 FLOPs per weight forward, 4 backward (input and weight gradients).
  double matmul_params = 0;
  for (int i = 0; i < num_layers(); ++i) matmul_params += static_cast<double>(widths_[i]) * widths_[i + 1];
  return 6.0 * matmul_params;
}

}  // namespace dslaunch::runtime
