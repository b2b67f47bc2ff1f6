// LossScaler: the fp16 loss scale, static or dynamic, with the exact transition rules of DeepSpeed's
// DynamicLossScaler (deepspeed/runtime/fp16/loss_scaler.py). Rules and a worked table:
// docs/numerics.md, "Loss scaling".
//
// The engine multiplies the loss by scale() before backward, checks the gradients for inf/NaN (on
// every rank, then a max all-reduce so that all ranks agree), and calls Update(overflow) exactly
// once per optimizer step. The returned decision says whether to apply or skip the step and what
// changed, for the log line. Pure: no clock, no I/O. Not thread-safe; one instance per engine.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace dslaunch::runtime {

// The `fp16` section of train.json, typed; the parser fills it directly (DeepSpeed's key names and
// defaults, docs/train-json.md). `fp16.enabled` is not here: it chooses the precision.
struct LossScalerConfig {
  // > 0: a static scale of exactly this value; 0: dynamic scaling (DeepSpeed's `loss_scale`).
  double loss_scale = 0.0;
  // The dynamic scale starts at 2^initial_scale_power.
  int initial_scale_power = 16;
  // Clean steps after which the scale doubles (`loss_scale_window`).
  int64_t loss_scale_window = 1000;
  // Overflows tolerated before the scale halves (`hysteresis`, DeepSpeed's delayed_shift).
  int hysteresis = 2;
  // The dynamic scale never goes below this (`min_loss_scale`).
  double min_loss_scale = 1.0;
  // true: every clean step refills the hysteresis; false: only a doubling refills it.
  bool consecutive_hysteresis = false;
  // true: an overflow while the scale already sits at min_loss_scale is fatal (DeepSpeed raises);
  // false: the step is skipped and the scale stays at the floor.
  bool raise_error_at_min_scale = true;
};

// 2^127 is the largest power of two a float holds; 2^64 already overflows every fp16 gradient.
inline constexpr int kMaxInitialScalePower = 64;

// The one check of LossScalerConfig (the parser and Engine::Create call it): loss_scale >= 0 and
// finite, 0 <= initial_scale_power <= kMaxInitialScalePower, loss_scale_window >= 1,
// hysteresis >= 1, min_loss_scale > 0 and finite. kInvalidArgument whose message starts with the
// train.json key, "fp16.<key>: ".
Status ValidateLossScalerConfig(const LossScalerConfig& config);

// What Update() did to the scale, for the log line.
enum class ScaleChange {
  kNone,                  // clean step, nothing changed (or static scale)
  kDoubled,               // clean step that completed a window: scale x2, hysteresis refilled
  kHysteresisConsumed,    // overflow absorbed by the hysteresis counter: scale unchanged
  kHalved,                // overflow: scale /2 (clamped to min_loss_scale)
  kAtMinimum,             // overflow with the scale already at min_loss_scale
};

// Stable lower-case name ("none", "doubled", ...).
std::string_view ScaleChangeName(ScaleChange change);

struct StepDecision {
  bool skip_step = false;        // true on overflow: do not apply gradients, do not step the LR
  ScaleChange change = ScaleChange::kNone;
  double old_scale = 1.0;        // the scale used for this step's backward
  double new_scale = 1.0;        // the scale for the next step
  int hysteresis_left = 0;       // DeepSpeed's cur_hysteresis after the update
  // Set only with change == kAtMinimum and raise_error_at_min_scale: the run must stop
  // (kFailedPrecondition: training cannot make progress at the minimum scale).
  bool fatal = false;

  // One line for rank 0's log, e.g.
  // "overflow: skipping step; loss scale 65536 -> 32768" or "loss scale 1024 -> 2048".
  std::string Describe() const;
};

class LossScaler {
 public:
  // `config` must pass ValidateLossScalerConfig (DSLAUNCH_CHECKed).
  explicit LossScaler(const LossScalerConfig& config);

  // The scale to multiply the loss by for the current step.
  double scale() const { return scale_; }
  bool dynamic() const { return dynamic_; }
  int hysteresis_left() const { return hysteresis_left_; }
  // Steps seen so far (DeepSpeed's cur_iter), skipped ones included.
  int64_t iteration() const { return iteration_; }

  // Records the outcome of one step (overflow anywhere in the job or not) and returns the
  // decision. A static scaler still skips overflowing steps but never changes its scale.
  StepDecision Update(bool overflow);

  // Checkpointed state: enough to resume with identical future decisions.
  struct State {
    double scale = 1.0;
    int64_t iteration = 0;
    int64_t last_overflow_iteration = -1;
    int hysteresis_left = 0;
  };
  State state() const;
  void Restore(const State& state);

 private:
  LossScalerConfig config_;
  bool dynamic_ = false;
  double scale_ = 1.0;
  int64_t iteration_ = 0;
  int64_t last_overflow_iteration_ = -1;
  int hysteresis_left_ = 0;
};

}  // namespace dslaunch::runtime
