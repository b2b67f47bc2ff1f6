#include "runtime/engine/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "common/check.h"

namespace dslaunch::runtime {
namespace {

// DeepSpeed's scale factor: the scale moves by powers of two, so scaling stays exact in fp32.
constexpr double kScaleFactor = 2.0;

// Prints a scale as an integer when it is one (the usual case), otherwise with full precision.
std::string FormatScale(double scale) {
  std::ostringstream out;
  if (scale >= 1.0 && scale == std::floor(scale) && scale < 1e18) {
    out << static_cast<long long>(scale);
  } else {
    out.precision(17);
    out << scale;
  }
  return out.str();
}

}  // namespace

Status ValidateLossScalerConfig(const LossScalerConfig& config) {
  if (!(config.loss_scale >= 0.0) || !std::isfinite(config.loss_scale)) {
    return InvalidArgumentError("fp16.loss_scale: must be 0 (dynamic) or a positive finite number");
  }
  if (config.initial_scale_power < 0 || config.initial_scale_power > kMaxInitialScalePower) {
    return InvalidArgumentError("fp16.initial_scale_power: must be in [0, " +
                                std::to_string(kMaxInitialScalePower) + "], got " +
                                std::to_string(config.initial_scale_power));
  }
  if (config.loss_scale_window < 1) {
    return InvalidArgumentError("fp16.loss_scale_window: must be >= 1, got " +
                                std::to_string(config.loss_scale_window));
  }
  if (config.hysteresis < 1) {
    return InvalidArgumentError("fp16.hysteresis: must be >= 1, got " +
                                std::to_string(config.hysteresis));
  }
  if (!(config.min_loss_scale > 0.0)) return InvalidArgumentError("fp16.min_loss_scale: must be > 0");
  if (!std::isfinite(config.min_loss_scale)) return InvalidArgumentError("fp16.min_loss_scale: must be finite");
  return Status::Ok();
}

std::string_view ScaleChangeName(ScaleChange change) {
  switch (change) {
    case ScaleChange::kNone: return "none";
    case ScaleChange::kDoubled: return "doubled";
    case ScaleChange::kHysteresisConsumed: return "hysteresis consumed";
    case ScaleChange::kHalved: return "halved";
    case ScaleChange::kAtMinimum: return "at minimum";
  }
  return "unknown";
}

std::string StepDecision::Describe() const {
  std::string line;
  if (skip_step) line = "overflow: skipping step; ";
  switch (change) {
    case ScaleChange::kNone:
      line += "loss scale " + FormatScale(new_scale);
      break;
    case ScaleChange::kDoubled:
    case ScaleChange::kHalved:
      line += "loss scale " + FormatScale(old_scale) + " -> " + FormatScale(new_scale);
      break;
    case ScaleChange::kHysteresisConsumed:
      line += "loss scale " + FormatScale(old_scale) + " kept, hysteresis left " +
              std::to_string(hysteresis_left);
      break;
    case ScaleChange::kAtMinimum:
      line += "loss scale already at the minimum " + FormatScale(old_scale);
      if (fatal) line += "; cannot decrease further, stopping";
      break;
  }
  return line;
}

LossScaler::LossScaler(const LossScalerConfig& config) : config_(config) {
  DSLAUNCH_CHECK(ValidateLossScalerConfig(config).ok()) << "unvalidated loss scaler config";
  dynamic_ = config.loss_scale == 0.0;
  scale_ = dynamic_ ? std::ldexp(1.0, config.initial_scale_power) : config.loss_scale;
  hysteresis_left_ = config.hysteresis;
}

StepDecision LossScaler::Update(bool overflow) {
  StepDecision decision;
  decision.skip_step = overflow;
  decision.old_scale = scale_;
  if (!dynamic_) {
    decision.new_scale = scale_;
    decision.hysteresis_left = hysteresis_left_;
    ++iteration_;
    return decision;
  }

  if (overflow) {
    if (config_.hysteresis == 1 || hysteresis_left_ == 1) {
      // The hysteresis is spent: lower the scale. It is not refilled here; only a doubling (or,
      // with consecutive_hysteresis, any clean step) refills it, so back-to-back overflows after
      // the first halving keep halving.
      if (scale_ == config_.min_loss_scale) {
        decision.change = ScaleChange::kAtMinimum;
        decision.fatal = config_.raise_error_at_min_scale;
      } else {
        scale_ = std::max(scale_ / kScaleFactor, config_.min_loss_scale);
        decision.change = ScaleChange::kHalved;
      }
    } else {
      --hysteresis_left_;
      decision.change = ScaleChange::kHysteresisConsumed;
    }
    last_overflow_iteration_ = iteration_;
  } else {
    if (config_.consecutive_hysteresis) hysteresis_left_ = config_.hysteresis;
    // Clean steps strictly between the last overflow and this one. The scale doubles when this
    // count reaches a positive multiple of the window, i.e. on the (window+1)-th clean step after
    // an overflow (or after the start), then every `window` clean steps.
    const int64_t stable_interval = iteration_ - last_overflow_iteration_ - 1;
    if (stable_interval > 0 && stable_interval % config_.loss_scale_window == 0) {
      hysteresis_left_ = config_.hysteresis;
      scale_ *= kScaleFactor;
      decision.change = ScaleChange::kDoubled;
    }
  }
  ++iteration_;
  decision.new_scale = scale_;
  decision.hysteresis_left = hysteresis_left_;
  return decision;
}

LossScaler::State LossScaler::state() const {
  return State{scale_, iteration_, last_overflow_iteration_, hysteresis_left_};
}

void LossScaler::Restore(const State& state) {
  scale_ = state.scale;
  iteration_ = state.iteration;
  last_overflow_iteration_ = state.last_overflow_iteration;
  hysteresis_left_ = state.hysteresis_left;
}

}  // namespace dslaunch::runtime
