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
#include <vector>

#include "common/status.h"
#include "runtime/config/train_config.h"

namespace dslaunch::runtime {

// Bytes one rank allocates (rank 0, which holds the largest shard), an upper bound of its peak
// resident memory (VmHWM): the engine's states follow its own accounting (Engine::memory(),
// exact); activations are the model's buffers (exact); `buffers` counts the transient buffers at
// their largest (the initial values read while the engine is built, the step's fp32 gradient, the
// reduce bucket, the acquired groups with the stage-3 prefetch run and its staging, their
// micro-step gradients, the host copy of an asynchronous checkpoint); `process` what does not grow
// with the model (the program and its libraries, each compute thread's BLAS buffer and stack,
// the data files, read whole). The bound is checked against measured peaks over a matrix of
// stages, precisions and offloads (docs/offload.md, "The estimate is an upper bound").
struct MemoryEstimate {
  double parameters = 0;       // in their storage type, whole or shard (+ persistent groups)
  double gradients = 0;        // whole (stages 0-1) or shard (2-3), storage type
  double optimizer_state = 0;  // fp32 master weights (16-bit storage) + optimizer moments, shard
  double activations = 0;      // the model's activations and scratch gradients (one micro-batch)
  double buffers = 0;          // transient fp32 buffers, see above
  double process = 0;          // the program, its threads and the data, see above
  double snapshots = 0;        // in-memory snapshot slots (docs/checkpoint.md, "Snapshots in memory")
  // The part of the total the offload buffer keys set (runtime/config/buffer_keys.h): the swap
  // rings, the reduce bucket, the prefetch run, parameters kept by max_in_cpu. Included above.
  double keyed = 0;
  double total() const {
    return parameters + gradients + optimizer_state + activations + buffers + process + snapshots;
  }
};

// What the estimate needs from outside the config, read at the program's edge.
struct ProcessFootprint {
  int compute_threads = 1;        // the rank's OpenMP/OpenBLAS threads
  double data_bytes = 0;          // the data files' sizes, summed (each is read whole)
  double largest_data_file = 0;   // bytes of the largest: its read buffer while it is decoded
  int snapshot_slots = 0;         // in-memory snapshot slots of the rank's state: SnapshotSlots
};

// The in-memory snapshot slots one rank's state fills on its node and its peers' (docs/checkpoint.md,
// "Copies on peer nodes"): its own two, and on each of `replicas` peer nodes up to three copies
// (two kept, one arriving); none without snapshots. Counted against the rank's node: its node
// holds as many copies for the node before it in the ring.
inline int SnapshotSlots(bool snapshots, int replicas) { return snapshots ? 2 + 3 * replicas : 0; }

// What one in-memory snapshot slot may hold beyond the state slice: its header and meta.json.
inline constexpr double kSnapshotMetaBytes = 1.0 * (1 << 20);

// Measured constants of the `process` term (docs/offload.md, "The estimate is an upper bound"):
// dslaunch-worker's resident memory before it allocates anything model-sized (the program, libc,
// libstdc++, OpenBLAS, Gloo, liburing, the store client and the config), and what each compute
// thread adds at its largest (OpenBLAS's packing buffer as far as its kernels touch it, the
// thread's stack, its malloc arena's first heap).
inline constexpr double kProcessBaselineBytes = 24.0 * (1 << 20);
inline constexpr double kPerComputeThreadBytes = 2.0 * (1 << 20);

MemoryEstimate EstimateTrainingMemory(const TrainConfig& config, int world_size,
                                      const ProcessFootprint& process = {});

// Elements per parameter group of the config's model, in layout order (before any model exists).
std::vector<double> ParameterGroupSizes(const TrainConfig& config);

// What the machine has for this job's ranks on it, read at the edge.
struct AvailableMemory {
  double bytes = 0;
  std::string source;  // how it was found, for the message: "MemAvailable", "cgroup limit", ...
};

// OK when `ranks_on_node` ranks of `need` fit in `available`; else kFailedPrecondition:
// "<file>: model needs about 41.2 GiB per rank (parameters 2.0 GiB, gradients 2.0 GiB, optimizer
// state 24.0 GiB, activations 11.7 GiB, buffers 1.5 GiB, process 92.0 MiB) x 2 ranks on this node
// = 82.4 GiB; this machine has 23.1 GiB available (MemAvailable). ..." with what to change: the
// activation keys when activations are half the need, the offload buffer keys when the bytes they
// set are, the stage, nodes, precision or model size otherwise.
Status CheckMemoryFits(const MemoryEstimate& need, int ranks_on_node, const AvailableMemory& available,
                       std::string_view file);

// "41.2 GiB", "12.0 MiB", "512 B".
std::string FormatBytesHuman(double bytes);

}  // namespace dslaunch::runtime
