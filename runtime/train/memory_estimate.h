// How much memory a training run will take per rank, estimated from its train.json before
// anything is allocated, and the check against what the machine has (docs/engine.md, "Memory";
// docs/train-json.md, "Limits"). A model that cannot fit is refused with a message that says how
// much it needs and how much there is, instead of std::bad_alloc or the OOM killer midway.
//
// Pure: the available memory is read at the program's edge (runtime/train/available_memory.h) and
// passed in as a number. Figures are doubles: a hostile config's products pass 2^64.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "runtime/config/train_config.h"

namespace dslaunch::runtime {

// Bytes one rank allocates (rank 0, which holds the largest shard). The engine's states follow
// its own accounting (Engine::memory(), exact); activations are the model's buffers (exact);
// `buffers` counts the transient buffers that are certain (the initial values read while the
// engine is built, the step's fp32 gradient, the reduce bucket, one acquired group and its
// gradient, the host copy of an asynchronous checkpoint), so the total is a slight underestimate:
// the check refuses only runs that cannot fit.
struct MemoryEstimate {
  double parameters = 0;       // in their storage type, whole or shard (+ persistent groups)
  double gradients = 0;        // whole (stages 0-1) or shard (2-3), storage type
  double optimizer_state = 0;  // fp32 master weights (16-bit storage) + optimizer moments, shard
  double activations = 0;      // the model's activations and scratch gradients (one micro-batch)
  double buffers = 0;          // transient fp32 buffers, see above
  double total() const { return parameters + gradients + optimizer_state + activations + buffers; }
};

MemoryEstimate EstimateTrainingMemory(const TrainConfig& config, int world_size);

// What the machine has for this job's ranks on it, read at the edge.
struct AvailableMemory {
  double bytes = 0;
  std::string source;  // how it was found, for the message: "MemAvailable", "cgroup limit", ...
};

// OK when `ranks_on_node` ranks of `need` fit in `available`; else kFailedPrecondition:
// "<file>: model needs about 41.2 GiB per rank (parameters 2.0 GiB, gradients 2.0 GiB, optimizer
// state 24.0 GiB, activations 11.7 GiB, buffers 1.5 GiB) x 2 ranks on this node = 82.4 GiB; this
// machine has 23.1 GiB available (MemAvailable): ..." with what to change.
Status CheckMemoryFits(const MemoryEstimate& need, int ranks_on_node, const AvailableMemory& available,
                       std::string_view file);

// "41.2 GiB", "12.0 MiB", "512 B".
std::string FormatBytesHuman(double bytes);

}  // namespace dslaunch::runtime
