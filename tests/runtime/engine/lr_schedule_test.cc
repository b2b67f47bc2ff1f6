// LR schedules at chosen iterations against values worked out by hand from DeepSpeed's formulas
// (docs/numerics.md, "Learning rate"); each expected value states its arithmetic.
#include "runtime/engine/lr_schedule.h"

#include <doctest/doctest.h>

#include <cmath>
#include <numbers>
#include <vector>

namespace dslaunch::runtime {
namespace {

// Rates are computed in double from a few operations; 1e-12 relative is far above rounding noise.
constexpr double kRelTol = 1e-12;

struct Point {
  int64_t iteration;
  double lr;
};

// The optimizer's lr where a schedule ignores it (WarmupLR, WarmupDecayLR): a value no expected
// rate below equals.
constexpr double kIgnoredLr = 123.0;

void CheckPoints(const LrSchedule& s, const std::vector<Point>& points, double base_lr = kIgnoredLr) {
  REQUIRE(ValidateLrSchedule(s).ok());
  for (const Point& p : points) {
    CAPTURE(p.iteration);
    CHECK(LearningRate(s, base_lr, p.iteration) == doctest::Approx(p.lr).epsilon(kRelTol));
  }
}

TEST_CASE("Constant schedule returns the optimizer's lr at every iteration") {
  LrSchedule s{.kind = LrScheduleKind::kConstant};
  CheckPoints(s, {{-1, 3e-4}, {0, 3e-4}, {12345, 3e-4}}, /*base_lr=*/3e-4);
}

TEST_CASE("WarmupLR with log warm-up") {
  // gamma = ln(it + 1) / ln(100); lr = 0 + 0.01 * gamma.
  LrSchedule s{.kind = LrScheduleKind::kWarmupLr, .warmup_min_lr = 0.0, .warmup_max_lr = 0.01,
               .warmup_num_steps = 100, .warmup_type = WarmupType::kLog};
  CheckPoints(s, {
      {-1, 0.0},      // before the first scheduler step: warmup_min_lr
      {0, 0.0},       // ln 1 = 0
      {9, 0.005},     // ln 10 / ln 100 = 1/2
      {99, 0.01},     // ln 100 / ln 100 = 1
      {100, 0.01},    // warm-up over: held at max
      {5000, 0.01},
  });
}

TEST_CASE("WarmupLR with linear warm-up") {
  // gamma = it / 10; lr = 0.001 + 0.01 * gamma.
  LrSchedule s{.kind = LrScheduleKind::kWarmupLr, .warmup_min_lr = 0.001, .warmup_max_lr = 0.011,
               .warmup_num_steps = 10, .warmup_type = WarmupType::kLinear};
  CheckPoints(s, {{0, 0.001}, {5, 0.006}, {9, 0.010}, {10, 0.011}, {11, 0.011}});
}

TEST_CASE("WarmupLR raises warmup_num_steps 1 to DeepSpeed's minimum of 2") {
  // Effective warm-up 2: linear gamma = it / 2.
  LrSchedule s{.kind = LrScheduleKind::kWarmupLr, .warmup_min_lr = 0.0, .warmup_max_lr = 1.0,
               .warmup_num_steps = 1, .warmup_type = WarmupType::kLinear};
  CheckPoints(s, {{0, 0.0}, {1, 0.5}, {2, 1.0}});
}

TEST_CASE("WarmupDecayLR decays linearly from max to min between warm-up and total") {
  // Warm-up 10 (linear), total 110: after warm-up gamma = (110 - it) / (110 - 10), floored at 0;
  // lr = 0.01 + 0.09 * gamma.
  LrSchedule s{.kind = LrScheduleKind::kWarmupDecayLr, .warmup_min_lr = 0.01, .warmup_max_lr = 0.1,
               .warmup_num_steps = 10, .warmup_type = WarmupType::kLinear, .total_num_steps = 110};
  CheckPoints(s, {
      {5, 0.055},     // warm-up: gamma 5/10
      {10, 0.1},      // gamma 100/100
      {60, 0.055},    // gamma 50/100
      {100, 0.019},   // gamma 10/100: 0.01 + 0.009
      {110, 0.01},    // gamma 0
      {200, 0.01},    // gamma max(0, -0.9) = 0
  });
}

TEST_CASE("WarmupDecayLR with total equal to warm-up uses a span of 1") {
  // total 10 = warm-up 10: gamma = max(0, (10 - it) / max(1, 0)) = 0 after warm-up. (A total
  // below the warm-up is rejected by ValidateLrSchedule.)
  LrSchedule s{.kind = LrScheduleKind::kWarmupDecayLr, .warmup_min_lr = 0.0, .warmup_max_lr = 1.0,
               .warmup_num_steps = 10, .warmup_type = WarmupType::kLinear, .total_num_steps = 10};
  CheckPoints(s, {{9, 0.9}, {10, 0.0}, {11, 0.0}});
}

TEST_CASE("WarmupCosineLR warms the ratio up, then follows a cosine to cos_min_ratio") {
  // base 0.1, warm-up 10 linear from ratio 0.2, total 110, floor 0.1.
  // Warm-up: ratio = 0.2 + (it / 10) * 0.8.
  // After:   p = min(1, (it - 10 + 1) / 100); ratio = 0.1 + 0.9 * (1 + cos(pi p)) / 2.
  LrSchedule s{.kind = LrScheduleKind::kWarmupCosineLr, .warmup_num_steps = 10,
               .warmup_type = WarmupType::kLinear, .total_num_steps = 110,
               .warmup_min_ratio = 0.2, .cos_min_ratio = 0.1};
  const double quarter = 0.1 + 0.9 * (1.0 + std::cos(std::numbers::pi / 4)) / 2.0;  // 0.86819805
  CheckPoints(s, {
      {-1, 0.0},              // DeepSpeed returns 0 before the first step
      {0, 0.02},              // ratio 0.2
      {5, 0.06},              // ratio 0.2 + 0.4
      {34, 0.1 * quarter},    // p = 25/100
      {59, 0.055},            // p = 1/2: cos = 0, ratio 0.1 + 0.45
      {109, 0.01},            // p = 1: ratio 0.1
      {500, 0.01},            // p clamped at 1: stays at the floor
  }, /*base_lr=*/0.1);
}

TEST_CASE("WarmupCosineLR with log warm-up") {
  // ratio = 0 + ln(it + 1) / ln(100) at it = 9 is 1/2.
  LrSchedule s{.kind = LrScheduleKind::kWarmupCosineLr, .warmup_num_steps = 100,
               .warmup_type = WarmupType::kLog, .total_num_steps = 1000, .warmup_min_ratio = 0.0};
  CheckPoints(s, {{0, 0.0}, {9, 1.0}, {99, 2.0}}, /*base_lr=*/2.0);
}

TEST_CASE("warmup_num_steps 0 is accepted and warms up over DeepSpeed's minimum of 2 steps") {
  // DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR take max(2, warmup_num_steps) and check
  // nothing else, so 0 runs: log gamma = ln(it + 1) / ln 2, i.e. 0 at it 0 and 1 from it 1 on.
  for (int64_t warmup : {0, 1}) {
    CAPTURE(warmup);
    const LrSchedule warmup_lr{.kind = LrScheduleKind::kWarmupLr, .warmup_min_lr = 0.1, .warmup_max_lr = 1.0,
                               .warmup_num_steps = warmup};
    CheckPoints(warmup_lr, {{-1, 0.1}, {0, 0.1}, {1, 1.0}, {2, 1.0}, {50, 1.0}});
    // Decay from it 2 (W = 2) to T = 10: lr = 0.1 + 0.9 (10 - it) / 8.
    const LrSchedule decay{.kind = LrScheduleKind::kWarmupDecayLr, .warmup_min_lr = 0.1, .warmup_max_lr = 1.0,
                           .warmup_num_steps = warmup, .total_num_steps = 10};
    CheckPoints(decay, {{0, 0.1}, {1, 1.0}, {2, 1.0}, {6, 0.55}, {10, 0.1}});
    // Cosine after W = 2 over T - W = 8 steps: at it 5, p = (5 - 2 + 1) / 8 = 1/2, cosine term 1/2,
    // ratio = 0 + 1 * 0.5.
    const LrSchedule cosine{.kind = LrScheduleKind::kWarmupCosineLr, .warmup_num_steps = warmup,
                            .total_num_steps = 10, .cos_min_ratio = 0.0};
    CheckPoints(cosine, {{0, 0.0}, {1, 2.0}, {5, 1.0}, {9, 0.0}}, /*base_lr=*/2.0);
  }
}

TEST_CASE("LearningRateForAppliedSteps is one scheduler iteration behind") {
  LrSchedule s{.kind = LrScheduleKind::kWarmupLr, .warmup_min_lr = 0.0, .warmup_max_lr = 1.0,
               .warmup_num_steps = 10, .warmup_type = WarmupType::kLinear};
  CHECK(LearningRateForAppliedSteps(s, kIgnoredLr, 0) == 0.0);   // iteration -1
  CHECK(LearningRateForAppliedSteps(s, kIgnoredLr, 1) == 0.0);   // iteration 0
  CHECK(LearningRateForAppliedSteps(s, kIgnoredLr, 6) == doctest::Approx(0.5));
}

TEST_CASE("ValidateLrSchedule names the offending key") {
  struct Case {
    LrSchedule schedule;
    const char* key;
  };
  const std::vector<Case> cases = {
      {{.kind = LrScheduleKind::kWarmupLr, .warmup_num_steps = -1}, "scheduler.params.warmup_num_steps"},
      {{.kind = LrScheduleKind::kWarmupDecayLr, .warmup_num_steps = 20, .total_num_steps = 10},
       "scheduler.params.warmup_num_steps: 20 > total_num_steps 10"},
      {{.kind = LrScheduleKind::kWarmupLr, .warmup_min_lr = -1}, "scheduler.params.warmup_min_lr"},
      {{.kind = LrScheduleKind::kWarmupDecayLr, .total_num_steps = 0}, "scheduler.params.total_num_steps"},
      {{.kind = LrScheduleKind::kWarmupCosineLr, .total_num_steps = 10, .warmup_min_ratio = 1.5},
       "scheduler.params.warmup_min_ratio"},
      {{.kind = LrScheduleKind::kWarmupCosineLr, .total_num_steps = 10, .cos_min_ratio = -0.1},
       "scheduler.params.cos_min_ratio"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.key);
    const Status status = ValidateLrSchedule(c.schedule);
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK(status.message().find(c.key) == 0);
  }
}

}  // namespace
}  // namespace dslaunch::runtime
