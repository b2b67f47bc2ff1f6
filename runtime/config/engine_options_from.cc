// EngineOptionsFrom (runtime/config/train_config.h): the engine's options from a parsed train.json.
// It lives on the config side because the engine does not know train.json's types.
#include "runtime/config/train_config.h"

namespace dslaunch::runtime {

EngineOptions EngineOptionsFrom(const TrainConfig& config) {
  EngineOptions o;
  o.zero = config.zero;
  o.precision = config.precision;
  o.loss_scaler = config.loss_scaler;
  o.optimizer = config.optimizer;
  o.schedule = config.lr_schedule;
  o.gradient_clipping = config.gradient_clipping;
  o.offload_param = config.offload_param;
  o.offload_optimizer = config.offload_optimizer;
  o.aio = config.aio;
  return o;
}

}  // namespace dslaunch::runtime
