#include "runtime/train/checkpoint_schedule.h"

namespace dslaunch::runtime {

CheckpointSchedule::CheckpointSchedule(const CheckpointConfig& config, int64_t total_steps)
    : enabled_(!config.dir.empty()),
      interval_(config.interval),
      async_(config.async),
      save_on_stop_(config.save_on_stop),
      total_steps_(total_steps) {}

bool CheckpointSchedule::IntervalDue(int64_t step) const {
  return enabled_ && interval_ > 0 && step % interval_ == 0;
}

SaveDecision CheckpointSchedule::AfterStep(int64_t step, bool stop) const {
  SaveDecision decision;
  if (stop) {
    decision.kind = SaveKind::kFinal;
    decision.why = "stop";
    decision.save = enabled_ && (save_on_stop_ || IntervalDue(step));
  } else if (IntervalDue(step) && step != total_steps_) {
    decision.kind = SaveKind::kPeriodic;
    decision.async = async_;
  }
  return decision;
}

SaveDecision CheckpointSchedule::AtEnd() const {
  SaveDecision decision;
  decision.kind = SaveKind::kFinal;
  decision.why = "end";
  decision.save = enabled_;
  return decision;
}

bool CheckpointSchedule::CompletePendingNow(bool pending, int ranks_written, int world) {
  return pending && ranks_written == world;
}

int64_t ResolveSnapshotInterval(int64_t configured, bool agent_memory, int max_restarts, bool state_offloaded) {
  if (!agent_memory) return 0;
  if (configured != kSnapshotIntervalAuto) return configured;
  return max_restarts > 0 && !state_offloaded ? 1 : 0;
}

}  // namespace dslaunch::runtime
