// The training loop of dslaunch-worker: data -> model -> engine, step after step, with rank 0
// printing progress. Everything it touches is passed in (config, communicator, token shards, an
// output function), so tests run it with the in-process communicator.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/communicator.h"
#include "runtime/train_config.h"

namespace dslaunch::runtime {

struct TrainData {
  std::vector<uint16_t> train;
  std::vector<uint16_t> val;  // may be empty: no validation
};

struct TrainResult {
  std::vector<double> losses;  // mean training loss of each step, averaged over ranks
  double val_loss = -1.0;      // after the last step; -1 without validation data
};

// Runs config.train.steps optimizer steps of the gpt model, with a validation pass every
// train.eval_interval steps and after the last, then (rank 0) a sample of train.sample_tokens
// tokens. `print` receives rank 0's progress lines (without newline); other ranks print nothing. Fails with the first error: a collective
// that failed (naming the peer), a model type or setting this build cannot train yet, data too
// short for one sequence.
// `metrics`, when set, receives rank 0's metrics as JSON objects, one per call (docs/engine.md,
// "Metrics"): a start record, one per step, one per validation.
Result<TrainResult> Train(const TrainConfig& config, const TrainData& data, Communicator& comm,
                          const std::function<void(const std::string&)>& print,
                          const std::function<void(const std::string&)>& metrics = {});

}  // namespace dslaunch::runtime
