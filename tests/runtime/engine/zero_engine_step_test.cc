// Engine::Step against known answers: gradients chosen so that their global norm is known in
// closed form and every reduction is exact in fp32, fp16 and bf16, on 1, 2 and 3 ranks, at every
// ZeRO stage; the updated parameters against the SGD and Adam(W) formulas evaluated here in
// double, with gradient clipping off, not triggered and triggered. Unlike the cross-stage
// comparisons of the trainer tests, a bug common to every stage shows here.
#include <doctest/doctest.h>

#include <cmath>
#include <span>
#include <vector>

#include "runtime/core/sixteen_bit_float.h"
#include "runtime/engine/engine.h"
#include "tests/fakes/engine_on_threads.h"

namespace dslaunch::runtime {
namespace {

// fp32 unit roundoff.
constexpr double kU = 1.0 / (1 << 24);

using testing::OddLayout;

// The gradient averaged over ranks: g[i] = +-(i mod 4 + 1) / 8. Over i = 0..40 the squares sum to
// (10 x (1 + 4 + 9 + 16) + 1) / 64 = 301 / 64, so the global norm is sqrt(301) / 8 = 2.1687.
double MeanGradient(size_t i) { return (i % 3 == 1 ? -1.0 : 1.0) * static_cast<double>(i % 4 + 1) / 8.0; }
const double kNorm = std::sqrt(301.0) / 8.0;

// Rank r of `world` contributes g[i] + (2r - (world - 1)) (i mod 3 - 1) / 16: the offsets cancel
// in the average. Every value, and every sum of them, is a small multiple of 1/16: exact in
// bf16's 8 significant bits, after any power-of-two loss scale, and through the fp32 average
// (x 1/world rounds 3x back to x exactly for x with at most two significant bits).
double RankGradient(size_t i, int rank, int world) {
  return MeanGradient(i) + (2.0 * rank - (world - 1)) * (static_cast<double>(i % 3) - 1.0) / 16.0;
}

// One optimizer step's gradient as the trainer makes it: `micro` micro-steps, each a forward
// pass acquiring every group and a backward pass from the last group to the first adding
// factor x RankGradient x loss_scale / micro and reporting the group ready.
void Backward(Engine& engine, const ParameterLayout& layout, int rank, int world, double factor, int micro) {
  ParameterAccess& access = engine.access();
  const int groups = static_cast<int>(layout.groups().size());
  for (int m = 0; m < micro; ++m) {
    for (int g = 0; g < groups; ++g) {
      (void)access.Acquire(g);
      access.Release(g);
    }
    for (int g = groups - 1; g >= 0; --g) {
      (void)access.Acquire(g);
      std::span<float> grad = access.Gradient(g);
      const size_t offset = layout.groups()[static_cast<size_t>(g)].offset;
      for (size_t j = 0; j < grad.size(); ++j) {
        grad[j] += static_cast<float>(factor * RankGradient(offset + j, rank, world) * engine.loss_scale() / micro);
      }
      access.Release(g);
      access.GradientReady(g);
    }
  }
}

// The clipping coefficient of torch.nn.utils.clip_grad_norm_ (as DeepSpeed): max_norm / (norm +
// 1e-6) where that is below 1; 1 otherwise and when clipping is off (max_norm 0).
double ClipCoefficient(double norm, double max_norm) {
  if (max_norm <= 0) return 1.0;
  return std::min(1.0, max_norm / (norm + 1e-6));
}

std::vector<float> Initial(const ParameterLayout& layout) {
  std::vector<float> p(layout.numel());
  for (size_t i = 0; i < p.size(); ++i) p[i] = 0.9f - 0.045f * static_cast<float>(i);  // [-0.9, 0.9]
  return p;
}

EngineOptions Options(int stage, Precision precision) {
  EngineOptions o;
  o.zero.stage = stage;
  // Small buckets: several collectives per step, buckets and all-gathers cutting through groups.
  o.zero.reduce_bucket_size = 16;
  o.zero.allgather_bucket_size = 10;
  o.zero.stage3_prefetch_bucket_size = 16;
  o.zero.stage3_param_persistence_threshold = 5;  // group "c" stays whole at stage 3
  o.precision = precision;
  o.loss_scaler.initial_scale_power = 12;  // 4096: unscaling matters; x 4 x 0.625 stays below fp16's max
  return o;
}

// After a step, what the model sees through Acquire is the master weights rounded to the
// storage type, on every rank.
void CheckPublished(Engine& engine, const ParameterLayout& layout, const std::vector<float>& master,
                    Precision precision) {
  std::vector<float> rounded(master.size());
  if (precision == Precision::kFp16) {
    std::vector<Half> h(master.size());
    FloatToHalf(master, h);
    HalfToFloat(h, rounded);
  } else if (precision == Precision::kBf16) {
    std::vector<BFloat16> h(master.size());
    FloatToBFloat16(master, h);
    BFloat16ToFloat(h, rounded);
  } else {
    rounded = master;
  }
  for (size_t g = 0; g < layout.groups().size(); ++g) {
    std::span<const float> seen = engine.access().Acquire(static_cast<int>(g));
    const size_t offset = layout.groups()[g].offset;
    for (size_t j = 0; j < seen.size(); ++j) CHECK(seen[j] == rounded[offset + j]);
    engine.access().Release(static_cast<int>(g));
  }
}

const Precision kPrecisions[] = {Precision::kFp32, Precision::kFp16, Precision::kBf16};

TEST_CASE("One SGD step: the exact global norm and the clipped update at every stage, precision and world size") {
  const ParameterLayout layout = OddLayout();
  const std::vector<float> initial = Initial(layout);
  REQUIRE(initial.size() == 41);
  constexpr double kLr = 0.25, kWeightDecay = 0.125;
  // Off, above the norm (not triggered), below it (coefficient 0.46).
  for (double max_norm : {0.0, 5.0, 1.0}) {
    // The update, from the formula: p -= lr (clip g + wd p), wd on decayed tensors only.
    const double coef = ClipCoefficient(kNorm, max_norm);
    std::vector<double> expected(initial.begin(), initial.end());
    for (const auto& group : layout.groups()) {
      for (const auto& t : group.tensors) {
        for (size_t i = t.offset; i < t.offset + t.numel; ++i) {
          expected[i] -= kLr * (coef * MeanGradient(i) + (t.decay ? kWeightDecay * initial[i] : 0.0));
        }
      }
    }
    for (Precision precision : kPrecisions) {
      for (int stage : {0, 1, 2, 3}) {
        for (int world : {1, 2, 3}) {
          CAPTURE(max_norm);
          CAPTURE(PrecisionName(precision));
          CAPTURE(stage);
          CAPTURE(world);
          EngineOptions o = Options(stage, precision);
          o.optimizer.kind = OptimizerKind::kSgd;
          o.optimizer.lr = kLr;
          o.optimizer.weight_decay = kWeightDecay;
          o.gradient_clipping = max_norm;
          testing::OnEveryRank(world, layout, o, initial, [&](int rank, Engine& engine) {
            const double scale = engine.loss_scale();
            CHECK(scale == (precision == Precision::kFp16 ? 4096.0 : 1.0));
            engine.BeginStep(2);
            Backward(engine, layout, rank, world, 1.0, /*micro=*/2);
            Result<StepStats> stats = engine.Step();
            REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
            CHECK_FALSE(stats->skipped);
            CHECK(stats->loss_scale == scale);
            CHECK(stats->lr == kLr);
            // Every gradient and partial sum of squares is exact: so is the norm.
            CHECK(stats->grad_norm == kNorm);
            std::vector<float> got(layout.numel());
            REQUIRE(engine.GatherParameters(got).ok());
            for (size_t i = 0; i < got.size(); ++i) {
              // fp32 master update: g x coefficient, + wd p, x lr, subtracted: four roundings of
              // quantities at most |p| + lr |g'|, and the coefficient's own rounding.
              const double tol = 8.0 * kU * (std::abs(expected[i]) + kLr * (std::abs(MeanGradient(i)) + std::abs(initial[i])));
              CAPTURE(i);
              CHECK(std::abs(got[i] - expected[i]) <= tol);
            }
            CheckPublished(engine, layout, got, precision);
          });
        }
      }
    }
  }
}

// Adam (Kingma and Ba 2015, Algorithm 1) with L2 weight decay folded into the gradient, or AdamW
// (Loshchilov and Hutter 2019) with it decoupled, in double: two steps with gradients g and 4g,
// clipped to max_norm (so only the second is clipped: its norm is 8.67).
std::vector<double> ExpectedAdam(const ParameterLayout& layout, const std::vector<float>& initial,
                                 const OptimizerParams& p, double max_norm) {
  std::vector<double> param(initial.begin(), initial.end()), m(initial.size(), 0.0), v(initial.size(), 0.0);
  for (int t = 1; t <= 2; ++t) {
    const double factor = t == 1 ? 1.0 : 4.0;
    const double coef = ClipCoefficient(factor * kNorm, max_norm);
    for (const auto& group : layout.groups()) {
      for (const auto& tensor : group.tensors) {
        const double wd = tensor.decay ? p.weight_decay : 0.0;
        for (size_t i = tensor.offset; i < tensor.offset + tensor.numel; ++i) {
          double g = coef * factor * MeanGradient(i);
          if (p.kind == OptimizerKind::kAdamW) {
            param[i] -= p.lr * wd * param[i];
          } else {
            g += wd * param[i];
          }
          m[i] = p.beta1 * m[i] + (1 - p.beta1) * g;
          v[i] = p.beta2 * v[i] + (1 - p.beta2) * g * g;
          const double m_hat = m[i] / (1 - std::pow(p.beta1, t)), v_hat = v[i] / (1 - std::pow(p.beta2, t));
          param[i] -= p.lr * m_hat / (std::sqrt(v_hat) + p.eps);
        }
      }
    }
  }
  return param;
}

TEST_CASE("Two Adam and AdamW steps, the second clipped, match the formulas at every stage, precision and world size") {
  const ParameterLayout layout = OddLayout();
  const std::vector<float> initial = Initial(layout);
  constexpr double kMaxNorm = 3.0;  // above the first step's norm 2.17, below the second's 8.67
  for (OptimizerKind kind : {OptimizerKind::kAdam, OptimizerKind::kAdamW}) {
    OptimizerParams params;
    params.kind = kind;
    params.lr = 0.01;
    params.beta1 = 0.8;
    params.beta2 = 0.95;
    params.eps = 1e-6;
    params.weight_decay = 0.1;
    const std::vector<double> expected = ExpectedAdam(layout, initial, params, kMaxNorm);
    for (Precision precision : kPrecisions) {
      for (int stage : {0, 1, 2, 3}) {
        for (int world : {1, 2, 3}) {
          CAPTURE(kind == OptimizerKind::kAdam ? "adam" : "adamw");
          CAPTURE(PrecisionName(precision));
          CAPTURE(stage);
          CAPTURE(world);
          EngineOptions o = Options(stage, precision);
          o.optimizer = params;
          o.gradient_clipping = kMaxNorm;
          testing::OnEveryRank(world, layout, o, initial, [&](int rank, Engine& engine) {
            for (double factor : {1.0, 4.0}) {
              engine.BeginStep(1);
              Backward(engine, layout, rank, world, factor, /*micro=*/1);
              Result<StepStats> stats = engine.Step();
              REQUIRE_MESSAGE(stats.ok(), stats.status().ToString());
              CHECK(stats->grad_norm == factor * kNorm);  // x 4: exact
            }
            CHECK(engine.applied_steps() == 2);
            std::vector<float> got(layout.numel());
            REQUIRE(engine.GatherParameters(got).ok());
            for (size_t i = 0; i < got.size(); ++i) {
              // Per step: the update lr m^/(sqrt(v^) + eps) is O(lr) with ~10 roundings (moments,
              // bias corrections, square root, division), the decay and subtractions a few of |p|.
              const double tol = 2 * (6.0 * kU * std::abs(expected[i]) + 16.0 * kU * params.lr);
              CAPTURE(i);
              CHECK(std::abs(got[i] - expected[i]) <= tol);
            }
            CheckPublished(engine, layout, got, precision);
          });
        }
      }
    }
  }
}

}  // namespace
}  // namespace dslaunch::runtime
