// EngineOptionsFrom (runtime/config/train_config.h): the engine's options from a parsed train.json.
// It lives on the config side because the engine does not know train.json's types.
#include "runtime/config/train_config.h"

namespace dslaunch::runtime {

EngineOptions EngineOptionsFrom(const TrainConfig& config) {
  EngineOptions o;
  o.zero = config.zero;
  o.precision = config.precision;
  o.loss_scaler.loss_scale = config.fp16.loss_scale;
  o.loss_scaler.initial_scale_power = config.fp16.initial_scale_power;
  o.loss_scaler.loss_scale_window = config.fp16.loss_scale_window;
  o.loss_scaler.hysteresis = config.fp16.hysteresis;
  o.loss_scaler.min_loss_scale = config.fp16.min_loss_scale;
  const OptimizerConfig& oc = config.optimizer;
  o.optimizer.kind = oc.type == OptimizerKind::kSgd       ? OptimizerKind::kSgd
                     : oc.decoupled_weight_decay         ? OptimizerKind::kAdamW
                                                         : OptimizerKind::kAdam;
  o.optimizer.lr = oc.lr;
  o.optimizer.beta1 = oc.betas[0];
  o.optimizer.beta2 = oc.betas[1];
  o.optimizer.eps = oc.eps;
  o.optimizer.weight_decay = oc.weight_decay;
  o.optimizer.momentum = oc.momentum;
  const SchedulerConfig& sc = config.scheduler;
  o.schedule.kind = sc.type;
  o.schedule.base_lr = oc.lr;
  o.schedule.warmup_min_lr = sc.warmup_min_lr;
  o.schedule.warmup_max_lr = sc.warmup_max_lr;
  o.schedule.warmup_num_steps = sc.warmup_num_steps;
  o.schedule.warmup_type = sc.warmup_type;
  o.schedule.total_num_steps = sc.total_num_steps;
  o.schedule.warmup_min_ratio = sc.warmup_min_ratio;
  o.schedule.cos_min_ratio = sc.cos_min_ratio;
  o.gradient_clipping = config.gradient_clipping;
  return o;
}

}  // namespace dslaunch::runtime
