// FlatParameterAccess: ParameterAccess over one full flat parameter buffer and one full gradient
// buffer, recording the order of calls. For model tests; the engine's ZeRO stages implement the
// real ones.
#pragma once

#include <string>
#include <vector>

#include "runtime/core/param_layout.h"
#include "runtime/core/parameter_access.h"

namespace dslaunch::testing {

class FlatParameterAccess : public runtime::ParameterAccess {
 public:
  FlatParameterAccess(const runtime::ParameterLayout& layout, std::vector<float>& params, std::vector<float>& grads)
      : layout_(layout), params_(params), grads_(grads) {}

  std::span<const float> Acquire(int group) override {
    calls_.push_back("acquire " + std::to_string(group));
    const auto& g = layout_.groups()[group];
    return {params_.data() + g.offset, g.numel};
  }
  void Release(int group) override { calls_.push_back("release " + std::to_string(group)); }
  std::span<float> Gradient(int group) override {
    const auto& g = layout_.groups()[group];
    return {grads_.data() + g.offset, g.numel};
  }
  void GradientReady(int group) override { ready_.push_back(group); }

  const std::vector<std::string>& calls() const { return calls_; }
  const std::vector<int>& ready() const { return ready_; }

 private:
  const runtime::ParameterLayout& layout_;
  std::vector<float>& params_;
  std::vector<float>& grads_;
  std::vector<std::string> calls_;
  std::vector<int> ready_;
};

}  // namespace dslaunch::testing
