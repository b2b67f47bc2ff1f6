#include "runtime/swap/ring_plan.h"

#include <algorithm>
#include <optional>

#include "common/check.h"

namespace dslaunch::runtime::swap {
namespace {

class Planner {
 public:
  Planner(size_t groups, size_t buffers, RingMode mode)
      : groups_(groups), buffers_(buffers), mode_(mode), pending_write_(buffers) {}

  std::vector<RingAction> Plan() {
    const size_t ahead = ReadAhead(buffers_, mode_);
    size_t next_read = 0;
    for (size_t g = 0; g < groups_; ++g) {
      if (mode_.read) {
        for (; next_read < groups_ && next_read <= g + ahead; ++next_read) {
          Acquire(next_read);
          Emit(RingStep::kStartRead, next_read);
        }
        Emit(RingStep::kWaitRead, g);
      } else {
        Acquire(g);
      }
      Emit(RingStep::kProcess, g);
      if (mode_.write) {
        Emit(RingStep::kStartWrite, g);
        pending_write_[g % buffers_] = g;
      }
    }
    // Drain in the order the writes were started.
    for (size_t g = groups_ >= buffers_ ? groups_ - buffers_ : 0; g < groups_; ++g) Acquire(g + buffers_);
    return std::move(actions_);
  }

 private:
  // Makes the buffer of `group` free: waits for the write of its previous occupant, if any.
  void Acquire(size_t group) {
    std::optional<size_t>& pending = pending_write_[group % buffers_];
    if (!pending) return;
    Emit(RingStep::kWaitWrite, *pending);
    pending.reset();
  }

  void Emit(RingStep step, size_t group) { actions_.push_back({step, group, group % buffers_}); }

  size_t groups_;
  size_t buffers_;
  RingMode mode_;
  std::vector<std::optional<size_t>> pending_write_;  // per buffer: the group whose write is in flight
  std::vector<RingAction> actions_;
};

}  // namespace

size_t ReadAhead(size_t buffers, RingMode mode) {
  if (buffers <= 1) return 0;
  if (!mode.write) return buffers - 1;
  return std::max<size_t>(1, buffers - 2);
}

std::vector<RingAction> PlanRing(size_t groups, size_t buffers, RingMode mode) {
  DSLAUNCH_CHECK(buffers >= 1) << "a ring needs a buffer";
  return Planner(groups, buffers, mode).Plan();
}

std::string ToString(const RingAction& a) {
  static constexpr const char* kNames[] = {"StartRead", "WaitRead", "Process", "StartWrite", "WaitWrite"};
  return std::string(kNames[static_cast<int>(a.step)]) + "(g=" + std::to_string(a.group) + ",b=" +
         std::to_string(a.buffer) + ")";
}

}  // namespace dslaunch::runtime::swap
