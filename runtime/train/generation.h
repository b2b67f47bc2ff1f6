// The generation a worker runs in (the launcher restarts a job as generations 0, 1, ...), as the
// runtime records it: rank 0 writes one `generation` record to metrics.jsonl at the first step the
// generation completes (docs/engine.md, "Metrics"). Pure: the environment comes in as a map.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "common/status.h"

namespace dslaunch::runtime {

struct GenerationInfo {
  int generation = 0;                    // DSLAUNCH_RESTART_COUNT (WorkerIdentity::generation)
  std::string reason;                    // DSLAUNCH_RESTART_REASON; empty when unset
  std::optional<int64_t> fault_time_ms;  // DSLAUNCH_FAULT_TIME_MS: Unix ms, the launcher's clock
  // When this worker started and when its communicator was ready (Unix ms, this node's clock),
  // once known: with the first step's time they break a restart down (scripts/bench-elastic.sh).
  std::optional<int64_t> started_ms;
  std::optional<int64_t> rendezvous_ms;
};

// Reads DSLAUNCH_RESTART_REASON and DSLAUNCH_FAULT_TIME_MS beside the given generation.
// kInvalidArgument naming the variable when DSLAUNCH_FAULT_TIME_MS is not a non-negative integer.
Result<GenerationInfo> ParseGenerationInfo(const std::map<std::string, std::string>& env, int generation);

// {"event":"generation","generation":g,"world_size":W,"reason":"...","resumed_step":s,
//  "seconds_lost":x}: reason is the restart reason, "start" when there is none; seconds_lost
// (only at generation > 0 with a fault time) is now_ms - fault_time_ms in seconds, `now_ms` being
// the Unix time (ms) at which the generation's first step completed. With info.started_ms and
// info.rendezvous_ms set, the record ends with "started_ms", "rendezvous_ms" and "first_step_ms"
// (= now_ms).
std::string GenerationRecordJson(const GenerationInfo& info, int world_size, int64_t resumed_step, int64_t now_ms);

}  // namespace dslaunch::runtime
