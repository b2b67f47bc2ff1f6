#include "runtime/engine/optimizer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/check.h"
#include "common/simd_clones.h"

namespace dslaunch::runtime {
namespace {

// The constants of one Adam(W) update: the step's rate, decay and bias corrections.
struct AdamConstants {
  float lr, wd, b1, b2, c1, c2, eps;
};

// Adam(W) over n elements: elementwise, so each SIMD clone gives the baseline's bits. AdamW decays
// the parameter before the update (decoupled); Adam adds the decay to the gradient.
DSLAUNCH_SIMD_CLONES void AdamUpdate(float* __restrict params, const float* __restrict grads, float* __restrict m,
                                     float* __restrict v, size_t n, AdamConstants k, bool decoupled) {
  if (decoupled) {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) {
      const float g = grads[i];
      const float p = params[i] - k.lr * k.wd * params[i];
      const float mi = k.b1 * m[i] + (1.0f - k.b1) * g;
      const float vi = k.b2 * v[i] + (1.0f - k.b2) * g * g;
      m[i] = mi;
      v[i] = vi;
      params[i] = p - k.lr * (mi * k.c1) / (std::sqrt(vi * k.c2) + k.eps);
    }
    return;
  }
#pragma omp simd
  for (size_t i = 0; i < n; ++i) {
    const float g = grads[i] + k.wd * params[i];
    const float mi = k.b1 * m[i] + (1.0f - k.b1) * g;
    const float vi = k.b2 * v[i] + (1.0f - k.b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    params[i] -= k.lr * (mi * k.c1) / (std::sqrt(vi * k.c2) + k.eps);
  }
}

// Elements per chunk of the update handed to one OpenMP thread: 256 KiB of each array, so that a
// thread streams long runs; below two chunks the update runs on the calling thread.
constexpr size_t kUpdateChunk = size_t{1} << 16;

}  // namespace

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

Status ValidateOptimizerParams(const OptimizerParams& p) {
  const auto bad = [](const char* key, const std::string& why) {
    return InvalidArgumentError(std::string("optimizer.params.") + key + ": " + why);
  };
  const auto finite_non_negative = [](double v) { return std::isfinite(v) && v >= 0.0; };
  if (!finite_non_negative(p.lr)) return bad("lr", "must be a finite number >= 0");
  if (!finite_non_negative(p.weight_decay)) return bad("weight_decay", "must be a finite number >= 0");
  if (p.kind == OptimizerKind::kSgd) {
    if (!finite_non_negative(p.momentum)) return bad("momentum", "must be a finite number >= 0");
    if (!finite_non_negative(p.dampening)) return bad("dampening", "must be a finite number >= 0");
    if (p.nesterov && (p.momentum <= 0.0 || p.dampening != 0.0)) {
      return bad("nesterov", "requires momentum > 0 and dampening 0");
    }
    return Status::Ok();
  }
  if (!(p.beta1 >= 0.0 && p.beta1 <= 1.0 && p.beta2 >= 0.0 && p.beta2 <= 1.0)) {
    return bad("betas", "must both be in [0, 1]");
  }
  if (!finite_non_negative(p.eps)) return bad("eps", "must be a finite number >= 0");
  return Status::Ok();
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
    const float mu = static_cast<float>(p.momentum);
    // Dampening 0 keeps the plain sum (no multiply by 1 - 0), so the common case stays as it was.
    const bool damped = p.dampening != 0.0;
    const float keep = static_cast<float>(1.0 - p.dampening);
    for (const auto& seg : segments) {
      const float wd = seg.decay ? static_cast<float>(p.weight_decay) : 0.0f;
      for (size_t i = seg.begin; i < seg.end; ++i) {
        float g = grads[i] + wd * params[i];
        if (momentum) {
          if (t == 1) {
            m[i] = g;
          } else {
            m[i] = damped ? mu * m[i] + keep * g : mu * m[i] + g;
          }
          g = p.nesterov ? g + mu * m[i] : m[i];
        }
        params[i] -= flr * g;
      }
    }
    return;
  }
  const float b1 = static_cast<float>(p.beta1), b2 = static_cast<float>(p.beta2), eps = static_cast<float>(p.eps);
  const float c1 =
      p.bias_correction ? 1.0f / static_cast<float>(1.0 - std::pow(p.beta1, static_cast<double>(t))) : 1.0f;
  const float c2 =
      p.bias_correction ? 1.0f / static_cast<float>(1.0 - std::pow(p.beta2, static_cast<double>(t))) : 1.0f;
  const bool decoupled = p.kind == OptimizerKind::kAdamW;
  DSLAUNCH_CHECK(m.size() == params.size() && v.size() == params.size())
      << m.size() << " and " << v.size() << " moments for " << params.size();
  // Each segment in chunks over the rank's OpenMP threads (OMP_NUM_THREADS, which the agent sets to
  // the rank's share of the node's cores), as DeepSpeed's CPU Adam does: elementwise, so the same
  // bits with any number of threads.
  for (const auto& seg : segments) {
    const AdamConstants k{flr, seg.decay ? static_cast<float>(p.weight_decay) : 0.0f, b1, b2, c1, c2, eps};
    const size_t n = seg.end - seg.begin;
#pragma omp parallel for schedule(static) if (n >= 2 * kUpdateChunk)
    for (size_t at = seg.begin; at < seg.end; at += kUpdateChunk) {
      const size_t len = std::min(kUpdateChunk, seg.end - at);
      AdamUpdate(params.data() + at, grads.data() + at, m.data() + at, v.data() + at, len, k, decoupled);
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
