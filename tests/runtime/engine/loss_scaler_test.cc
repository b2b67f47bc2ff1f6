// The loss scaler as a table of transitions (docs/numerics.md, "Loss scaling"). Each row is one
// step: whether it overflowed, then the expected skip, scale after the update, and change.
#include "runtime/engine/loss_scaler.h"

#include <doctest/doctest.h>

#include <vector>

namespace dslaunch::runtime {
namespace {

constexpr bool O = true;   // overflow step
constexpr bool C = false;  // clean step

struct Row {
  bool overflow;
  bool skip;
  double scale_after;
  ScaleChange change;
  int hysteresis_after;
};

void RunTable(const LossScalerConfig& config, double initial_scale, const std::vector<Row>& rows) {
  REQUIRE(ValidateLossScalerConfig(config).ok());
  LossScaler scaler(config);
  CHECK(scaler.scale() == initial_scale);
  for (size_t i = 0; i < rows.size(); ++i) {
    CAPTURE(i);
    const double before = scaler.scale();
    const StepDecision d = scaler.Update(rows[i].overflow);
    CHECK(d.skip_step == rows[i].skip);
    CHECK(d.old_scale == before);
    CHECK(d.new_scale == rows[i].scale_after);
    CHECK(scaler.scale() == rows[i].scale_after);
    CHECK(d.change == rows[i].change);
    CHECK(d.hysteresis_left == rows[i].hysteresis_after);
    CHECK_FALSE(d.fatal);
  }
}

using enum ScaleChange;

TEST_CASE("LossScaler doubles after each window and spends hysteresis before halving") {
  // Start 2^4 = 16, window 2, hysteresis 2. The doubling test is on the clean steps strictly
  // between the last overflow and this step: it fires when that count is a positive multiple of 2.
  LossScalerConfig config{.initial_scale_power = 4, .loss_scale_window = 2, .hysteresis = 2};
  RunTable(config, 16, {
      {C, false, 16, kNone, 2},               // iter 0: 0 clean steps before it
      {C, false, 16, kNone, 2},               // iter 1: 1
      {C, false, 32, kDoubled, 2},            // iter 2: 2 -> double
      {C, false, 32, kNone, 2},               // iter 3: 3
      {C, false, 64, kDoubled, 2},            // iter 4: 4 -> double
      {O, true, 64, kHysteresisConsumed, 1},  // iter 5: first overflow absorbed
      {O, true, 32, kHalved, 1},              // iter 6: hysteresis spent -> halve
      {O, true, 16, kHalved, 1},              // iter 7: not refilled by a halving -> halve again
      {C, false, 16, kNone, 1},               // iter 8: 0 clean steps since iter 7
      {C, false, 16, kNone, 1},               // iter 9: 1
      {C, false, 32, kDoubled, 2},            // iter 10: 2 -> double, hysteresis refilled
      {O, true, 32, kHysteresisConsumed, 1},  // iter 11
      {C, false, 32, kNone, 1},               // iter 12: a clean step does not refill
      {O, true, 16, kHalved, 1},              // iter 13
  });
}

TEST_CASE("LossScaler with consecutive_hysteresis refills on every clean step") {
  LossScalerConfig config{.initial_scale_power = 4, .loss_scale_window = 2, .hysteresis = 2,
                          .consecutive_hysteresis = true};
  RunTable(config, 16, {
      {O, true, 16, kHysteresisConsumed, 1},
      {C, false, 16, kNone, 2},               // refilled
      {O, true, 16, kHysteresisConsumed, 1},  // without consecutive mode this would halve
      {O, true, 8, kHalved, 1},
      {C, false, 8, kNone, 2},
      {C, false, 8, kNone, 2},
      {C, false, 16, kDoubled, 2},
  });
}

TEST_CASE("LossScaler with hysteresis 1 halves on every overflow and window 1 doubles each step") {
  LossScalerConfig config{.initial_scale_power = 0, .loss_scale_window = 1, .hysteresis = 1,
                          .min_loss_scale = 0.25};
  RunTable(config, 1, {
      {C, false, 1, kNone, 1},       // iter 0: nothing before it
      {C, false, 2, kDoubled, 1},    // iter 1
      {C, false, 4, kDoubled, 1},    // iter 2
      {O, true, 2, kHalved, 1},
      {O, true, 1, kHalved, 1},
      {O, true, 0.5, kHalved, 1},
      {O, true, 0.25, kHalved, 1},   // reaches the floor
      {C, false, 0.25, kNone, 1},
      {C, false, 0.5, kDoubled, 1},
  });
}

TEST_CASE("LossScaler clamps a halving to min_loss_scale and then holds the floor") {
  // 4 / 2 = 2 would pass the floor of 3: clamped. raise_error_at_min_scale off: the next overflow
  // only skips.
  LossScalerConfig config{.initial_scale_power = 2, .hysteresis = 1, .min_loss_scale = 3,
                          .raise_error_at_min_scale = false};
  RunTable(config, 4, {
      {O, true, 3, kHalved, 1},
      {O, true, 3, kAtMinimum, 1},
      {O, true, 3, kAtMinimum, 1},
      {C, false, 3, kNone, 1},
  });
}

TEST_CASE("LossScaler reports a fatal decision for an overflow at the minimum scale") {
  LossScalerConfig config{.initial_scale_power = 1, .hysteresis = 1, .min_loss_scale = 1};
  LossScaler scaler(config);
  CHECK(scaler.Update(O).new_scale == 1);
  const StepDecision d = scaler.Update(O);
  CHECK(d.skip_step);
  CHECK(d.change == kAtMinimum);
  CHECK(d.fatal);
  CHECK(d.Describe().find("cannot decrease") != std::string::npos);
}

TEST_CASE("LossScaler with loss_scale > 0 is static and still skips overflowing steps") {
  LossScalerConfig config{.loss_scale = 128, .loss_scale_window = 1, .hysteresis = 1};
  LossScaler scaler(config);
  CHECK_FALSE(scaler.dynamic());
  RunTable(config, 128, {
      {C, false, 128, kNone, 1},
      {C, false, 128, kNone, 1},
      {O, true, 128, kNone, 1},
      {O, true, 128, kNone, 1},
      {C, false, 128, kNone, 1},
  });
}

TEST_CASE("LossScaler defaults match DeepSpeed's fp16 defaults") {
  LossScaler scaler(LossScalerConfig{});
  CHECK(scaler.dynamic());
  CHECK(scaler.scale() == 65536.0);
  CHECK(scaler.hysteresis_left() == 2);
  // 1000 clean steps keep the scale, the 1001st doubles it.
  for (int i = 0; i < 1000; ++i) REQUIRE(scaler.Update(C).change == kNone);
  CHECK(scaler.Update(C).change == kDoubled);
  CHECK(scaler.scale() == 131072.0);
}

TEST_CASE("LossScaler state round-trips and gives the same future decisions") {
  LossScalerConfig config{.initial_scale_power = 8, .loss_scale_window = 3, .hysteresis = 2};
  const std::vector<bool> steps = {C, O, C, C, C, C, O, O, C, C, C, C, C, O, C, C, C, C};
  LossScaler a(config);
  for (size_t i = 0; i < 7; ++i) (void)a.Update(steps[i]);
  LossScaler b(config);
  b.Restore(a.state());
  for (size_t i = 7; i < steps.size(); ++i) {
    CAPTURE(i);
    const StepDecision da = a.Update(steps[i]);
    const StepDecision db = b.Update(steps[i]);
    CHECK(da.new_scale == db.new_scale);
    CHECK(da.change == db.change);
    CHECK(da.hysteresis_left == db.hysteresis_left);
  }
  CHECK(a.iteration() == b.iteration());
}

TEST_CASE("LossScaler decisions describe themselves for the log line") {
  LossScaler scaler(LossScalerConfig{.initial_scale_power = 16, .hysteresis = 1});
  CHECK(scaler.Update(O).Describe() == "overflow: skipping step; loss scale 65536 -> 32768");
  CHECK(scaler.Update(C).Describe() == "loss scale 32768");
}

TEST_CASE("ValidateLossScalerConfig names the offending key") {
  struct Case {
    LossScalerConfig config;
    const char* key;
  };
  const std::vector<Case> cases = {
      {{.loss_scale = -1}, "fp16.loss_scale"},
      {{.initial_scale_power = -1}, "fp16.initial_scale_power"},
      {{.initial_scale_power = 65}, "fp16.initial_scale_power"},
      {{.loss_scale_window = 0}, "fp16.loss_scale_window"},
      {{.hysteresis = 0}, "fp16.hysteresis"},
      {{.min_loss_scale = 0}, "fp16.min_loss_scale"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.key);
    const Status status = ValidateLossScalerConfig(c.config);
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK(status.message().find(c.key) == 0);
  }
  CHECK(ValidateLossScalerConfig(LossScalerConfig{}).ok());
}

}  // namespace
}  // namespace dslaunch::runtime
