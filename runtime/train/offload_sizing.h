// Offload buffers sized to fit the node (docs/offload.md, "Buffers sized to fit"): the offload
// buffer keys a train.json left out (when the run offloads to NVMe) or set to "auto" get the
// largest values, up to DeepSpeed's defaults, with which the memory estimate
// (runtime/train/memory_estimate.h) fits the memory each rank has; a key given a number that
// cannot fit is refused naming the key and a value that would.
//
// Pure: the available memory is read at the program's edge and agreed on by every rank (the
// smallest), so that every rank chooses the same sizes (the reduce buckets and the prefetch runs
// are collectives).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "runtime/config/train_config.h"
#include "runtime/train/memory_estimate.h"

namespace dslaunch::runtime {

// Below these the run would do more I/O requests and collectives than it gains memory: a sized
// key never goes lower (an explicit value may), and a run that does not fit at these is refused
// by CheckMemoryFits with the keys named.
inline constexpr int64_t kMinSizedElements = 1 << 16;  // sub-groups, buckets, the prefetch run
inline constexpr int kMinSizedOptimizerBuffers = 3;    // read ahead, update, write behind at once
inline constexpr int kMinSizedParamBuffers = 2;        // one read in flight beside the one in use

// One key the run uses, its value after sizing, and where it came from.
struct BufferChoice {
  BufferKey key;
  int64_t value = 0;
  KeySource source = KeySource::kDefault;
};

struct SizedBuffers {
  // The sizable keys that matter to this run, in BufferKey order; empty when the run neither
  // offloads to NVMe nor has a key sized ("auto").
  std::vector<BufferChoice> keys;
  bool shrunk = false;             // DeepSpeed's defaults did not fit: the sized keys were lowered
  double budget = 0;               // bytes per rank the sizes were chosen for
};

// Whether the run reads `key` at all (sub_group_size only with the optimizer state on NVMe, the
// parameter keys only with parameters on NVMe at stage 3, the prefetch bucket at stage 3; the
// reduce bucket always: it is the gradient reduction's chunk at every stage).
bool BufferKeyMatters(const TrainConfig& config, BufferKey key);

// Whether a key from `source` is sized: "auto" always; left out when the run offloads the optimizer
// state or the parameters to NVMe (DeepSpeed's defaults stand otherwise).
bool IsSized(const TrainConfig& config, KeySource source);

// Sets the sized keys of config->engine for `budget_per_rank` bytes (the node's available memory
// divided among its ranks): DeepSpeed's defaults when the estimate fits with them; otherwise the
// buffer counts at their minimum above and one size for the size keys (sub-group, buckets,
// max_in_cpu), the largest that fits, rounded down to two significant digits; the parameter
// buffer_size (a bound here, not an allocation) the largest parameter group. A key given a number
// is kept. Then, if the estimate still exceeds the budget and lowering one explicit key alone would
// fit, returns kFailedPrecondition:
//   "<file>: zero_optimization.sub_group_size: 1000000000 cannot fit: the run needs about 5.7 GiB
//    per rank, 600.0 MiB available (cgroup ... limit); set it to at most 4700000, or to "auto""
// naming each such key. Otherwise OK (CheckMemoryFits has the last word).
Result<SizedBuffers> SizeOffloadBuffers(TrainConfig* config, int world_size, const ProcessFootprint& process,
                                        double budget_per_rank, std::string_view budget_source,
                                        std::string_view file);

// The start-up line: "offload buffers for 572.2 MiB per rank: zero_optimization.sub_group_size
// 4700000 (left out), ..., zero_optimization.offload_param.buffer_count 5 (set)". Empty when
// sized.keys is.
std::string SizedBuffersLine(const SizedBuffers& sized);

}  // namespace dslaunch::runtime
