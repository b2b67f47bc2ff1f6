#include "runtime/engine/optimizer.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace dslaunch::runtime {

OptimizerState OptimizerState::For(const OptimizerParams& params, size_t numel) {
  OptimizerState s;
  if (params.kind == OptimizerKind::kSgd) {
    if (params.momentum != 0.0) s.m.assign(numel, 0.0f);
  } else {
    s.m.assign(numel, 0.0f);
    s.v.assign(numel, 0.0f);
  }
  return s;
}

void OptimizerStep(const OptimizerParams& p, double lr, std::span<float> params, std::span<const float> grads,
                   const std::vector<DecaySegment>& segments, OptimizerState& state) {
  OptimizerUpdate(p, lr, ++state.step, params, grads, segments, state.m, state.v);
}

void OptimizerUpdate(const OptimizerParams& p, double lr, int64_t t, std::span<float> params,
                     std::span<const float> grads, const std::vector<DecaySegment>& segments, std::span<float> m,
                     std::span<float> v) {
  DSLAUNCH_CHECK(params.size() == grads.size()) << params.size() << " params, " << grads.size() << " grads";
  const float flr = static_cast<float>(lr);
  if (p.kind == OptimizerKind::kSgd) {
    const bool momentum = p.momentum != 0.0;
    DSLAUNCH_CHECK(!momentum || m.size() == params.size()) << m.size() << " momentum values for " << params.size();
    for (const auto& seg : segments) {
      const float wd = seg.decay ? static_cast<float>(p.weight_decay) : 0.0f;
      for (size_t i = seg.begin; i < seg.end; ++i) {
        float g = grads[i] + wd * params[i];
        if (momentum) {
          m[i] = t == 1 ? g : static_cast<float>(p.momentum) * m[i] + g;
          g = m[i];
        }
        params[i] -= flr * g;
      }
    }
    return;
  }
  const float b1 = static_cast<float>(p.beta1), b2 = static_cast<float>(p.beta2), eps = static_cast<float>(p.eps);
  const float c1 = 1.0f / static_cast<float>(1.0 - std::pow(p.beta1, static_cast<double>(t)));
  const float c2 = 1.0f / static_cast<float>(1.0 - std::pow(p.beta2, static_cast<double>(t)));
  const bool decoupled = p.kind == OptimizerKind::kAdamW;
  DSLAUNCH_CHECK(m.size() == params.size() && v.size() == params.size())
      << m.size() << " and " << v.size() << " moments for " << params.size();
  for (const auto& seg : segments) {
    const float wd = seg.decay ? static_cast<float>(p.weight_decay) : 0.0f;
    for (size_t i = seg.begin; i < seg.end; ++i) {
      float g = grads[i];
      if (decoupled) {
        params[i] -= flr * wd * params[i];
      } else {
        g += wd * params[i];
      }
      m[i] = b1 * m[i] + (1.0f - b1) * g;
      v[i] = b2 * v[i] + (1.0f - b2) * g * g;
      params[i] -= flr * (m[i] * c1) / (std::sqrt(v[i] * c2) + eps);
    }
  }
}

std::vector<DecaySegment> SegmentsWithin(const std::vector<DecaySegment>& segments, size_t begin, size_t end) {
  std::vector<DecaySegment> out;
  for (const DecaySegment& seg : segments) {
    const size_t b = std::max(seg.begin, begin), e = std::min(seg.end, end);
    if (e > b) out.push_back({b - begin, e - begin, seg.decay});
  }
  return out;
}

}  // namespace dslaunch::runtime
