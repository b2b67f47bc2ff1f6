#include "runtime/engine/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace dslaunch::runtime {
namespace {

// DeepSpeed raises warmup_num_steps to at least 2 so that ln(warmup_num_steps) > 0.
constexpr int64_t kMinEffectiveWarmupSteps = 2;

int64_t EffectiveWarmupSteps(const LrSchedule& s) {
  return std::max(kMinEffectiveWarmupSteps, s.warmup_num_steps);
}

// Warm-up progress in [0, 1) for 0 <= iteration < warmup steps.
double WarmupGamma(const LrSchedule& s, int64_t iteration) {
  const double warmup = static_cast<double>(EffectiveWarmupSteps(s));
  if (s.warmup_type == WarmupType::kLog) {
    return std::log(static_cast<double>(iteration) + 1.0) / std::log(warmup);
  }
  return static_cast<double>(iteration) / warmup;
}

bool FiniteNonNegative(double v) { return std::isfinite(v) && v >= 0.0; }

Status Bad(const char* key, const std::string& why) {
  return InvalidArgumentError(std::string("scheduler.params.") + key + ": " + why);
}

}  // namespace

Status ValidateLrSchedule(const LrSchedule& s) {
  if (s.kind == LrScheduleKind::kConstant) return Status::Ok();
  if (s.warmup_num_steps < 0) {
    return Bad("warmup_num_steps", "must be an integer >= 0, got " + std::to_string(s.warmup_num_steps));
  }
  if (s.kind == LrScheduleKind::kWarmupLr || s.kind == LrScheduleKind::kWarmupDecayLr) {
    if (!FiniteNonNegative(s.warmup_min_lr)) return Bad("warmup_min_lr", "must be finite and >= 0");
    if (!FiniteNonNegative(s.warmup_max_lr)) return Bad("warmup_max_lr", "must be finite and >= 0");
  }
  if (s.kind == LrScheduleKind::kWarmupDecayLr || s.kind == LrScheduleKind::kWarmupCosineLr) {
    if (s.total_num_steps < 1) {
      return Bad("total_num_steps", "must be a positive integer, got " +
                                        std::to_string(s.total_num_steps));
    }
  }
  if (s.kind == LrScheduleKind::kWarmupCosineLr) {
    if (!(s.warmup_min_ratio >= 0.0 && s.warmup_min_ratio <= 1.0)) {
      return Bad("warmup_min_ratio", "must be in [0, 1]");
    }
    if (!(s.cos_min_ratio >= 0.0 && s.cos_min_ratio <= 1.0)) {
      return Bad("cos_min_ratio", "must be in [0, 1]");
    }
  }
  if (s.kind != LrScheduleKind::kWarmupLr && s.warmup_num_steps > s.total_num_steps) {
    return Bad("warmup_num_steps", std::to_string(s.warmup_num_steps) + " > total_num_steps " +
                                       std::to_string(s.total_num_steps));
  }
  return Status::Ok();
}

double LearningRate(const LrSchedule& s, double base_lr, int64_t iteration) {
  const int64_t warmup = EffectiveWarmupSteps(s);
  switch (s.kind) {
    case LrScheduleKind::kConstant:
      return base_lr;

    case LrScheduleKind::kWarmupLr:
    case LrScheduleKind::kWarmupDecayLr: {
      if (iteration < 0) return s.warmup_min_lr;
      double gamma = 1.0;
      if (iteration < warmup) {
        gamma = WarmupGamma(s, iteration);
      } else if (s.kind == LrScheduleKind::kWarmupDecayLr) {
        // Linear from 1 at the end of warm-up to 0 at total_num_steps, then held at 0.
        const double remaining = static_cast<double>(s.total_num_steps - iteration);
        const double span = std::max(1.0, static_cast<double>(s.total_num_steps - warmup));
        gamma = std::max(0.0, remaining / span);
      }
      return s.warmup_min_lr + (s.warmup_max_lr - s.warmup_min_lr) * gamma;
    }

    case LrScheduleKind::kWarmupCosineLr: {
      if (iteration < 0) return 0.0;
      double ratio;
      if (iteration < warmup) {
        ratio = s.warmup_min_ratio + WarmupGamma(s, iteration) * (1.0 - s.warmup_min_ratio);
      } else {
        // Cosine over the steps after warm-up; progress is clamped at 1 so the rate stays at the
        // floor past total_num_steps instead of rising again (current DeepSpeed behaviour).
        const double real_step = static_cast<double>(iteration - warmup + 1);
        const double real_total = std::max<double>(1.0, static_cast<double>(s.total_num_steps - warmup));
        const double progress = std::min(1.0, real_step / real_total);
        const double cosine = (1.0 + std::cos(std::numbers::pi * progress)) / 2.0;
        ratio = std::max(0.0, s.cos_min_ratio + (1.0 - s.cos_min_ratio) * cosine);
      }
      return base_lr * ratio;
    }
  }
  return base_lr;
}

}  // namespace dslaunch::runtime
