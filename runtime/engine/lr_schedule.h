// Learning-rate schedules with DeepSpeed's parameter names and formulas
// (deepspeed/runtime/lr_schedules.py: WarmupLR, WarmupDecayLR, WarmupCosineLR), plus a constant
// schedule for configs without a `scheduler` section. Formulas: docs/numerics.md, "Learning rate".
//
// A schedule is a typed value parsed once from train.json; LearningRate() is a pure function of
// it, the optimizer's lr and the iteration. Iterations follow DeepSpeed's `last_batch_iteration`: the scheduler starts
// at -1 and steps once after every *applied* optimizer step (a step skipped for an fp16 overflow
// does not advance it). So the optimizer step that follows `applied` earlier applied steps uses
// LearningRate(applied - 1); LearningRateForAppliedSteps() spells that out.
#pragma once

#include <cstdint>

#include "common/status.h"

namespace dslaunch::runtime {

enum class LrScheduleKind {
  kConstant,        // no scheduler: the optimizer's lr throughout
  kWarmupLr,        // warm up from warmup_min_lr to warmup_max_lr, then hold
  kWarmupDecayLr,   // as WarmupLR, then linear decay to warmup_min_lr at total_num_steps
  kWarmupCosineLr,  // ratio warm-up to 1, then cosine to cos_min_ratio, times the optimizer's lr
};

enum class WarmupType {
  kLog,     // gamma = ln(iteration + 1) / ln(warmup_num_steps)  (DeepSpeed's default)
  kLinear,  // gamma = iteration / warmup_num_steps
};

// The `scheduler` section of train.json, typed; the parser fills it directly (DeepSpeed's names and
// defaults, docs/train-json.md). Fields not used by `kind` are ignored.
struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  // WarmupLR / WarmupDecayLR.
  double warmup_min_lr = 0.0;
  double warmup_max_lr = 1e-3;
  // All warm-up schedules. Runs as max(2, warmup_num_steps), as DeepSpeed does (ln 1 = 0 would
  // divide by 0): 0 and 1 are accepted and give a two-step warm-up.
  int64_t warmup_num_steps = 1000;
  WarmupType warmup_type = WarmupType::kLog;
  // WarmupDecayLR / WarmupCosineLR.
  int64_t total_num_steps = 0;
  // WarmupCosineLR.
  double warmup_min_ratio = 0.0;
  double cos_min_ratio = 1e-4;
};

// The one check of LrSchedule (the parser calls it). Rejects warmup_num_steps < 0 (0 and 1 are
// DeepSpeed's two-step warm-up), negative or non-finite rates, ratios outside [0, 1], and for the
// decaying kinds total_num_steps < 1 or < warmup_num_steps (DeepSpeed only warns about the latter;
// here it is an error: the decay would never run as configured). kInvalidArgument whose message
// starts with the train.json key, "scheduler.params.<key>: ". (The optimizer's lr, which the
// schedule scales, is ValidateOptimizerParams's to check.)
Status ValidateLrSchedule(const LrSchedule& schedule);

// The learning rate at scheduler iteration `iteration` (DeepSpeed's last_batch_iteration) for an
// optimizer whose `params.lr` is `base_lr` (the constant rate, and WarmupCosineLR's peak; WarmupLR
// and WarmupDecayLR ignore it). iteration < 0 (before the first scheduler step) gives the warm-up
// start: warmup_min_lr for WarmupLR/WarmupDecayLR, 0 for WarmupCosineLR (as DeepSpeed), base_lr
// for constant. Precondition: ValidateLrSchedule(schedule).ok().
double LearningRate(const LrSchedule& schedule, double base_lr, int64_t iteration);

// The rate for the next optimizer step after `applied_steps` applied (not skipped) steps.
inline double LearningRateForAppliedSteps(const LrSchedule& schedule, double base_lr, int64_t applied_steps) {
  return LearningRate(schedule, base_lr, applied_steps - 1);
}

}  // namespace dslaunch::runtime
