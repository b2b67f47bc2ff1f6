// The order of operations of the buffer ring that streams sub-groups through memory
// (docs/offload.md, "Pipeline"). Pure: a list of actions computed from counts alone; SwapStream
// (swap_stream.h) carries it out with real I/O, tests check it with a simulation.
//
// Sub-group g uses buffer g % buffers. Reading ahead of the sub-group being processed is bounded
// by ReadAhead(); a buffer is reused for sub-group g only after the write of sub-group g - buffers
// (its previous occupant) has completed. With 3 buffers, read-modify-write processes sub-group i
// while sub-group i + 1 is read and sub-group i - 1 is written back; more buffers read further
// ahead; 2 buffers overlap the read only; 1 buffer runs every step in turn.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dslaunch::runtime::swap {

// What the ring does with each sub-group: read it in (from the swap file) and/or write it back.
// Read-modify-write is the optimizer step; read-only streams state out (a checkpoint save);
// write-only fills the file (the first step, a checkpoint load).
struct RingMode {
  bool read = true;
  bool write = true;
};

enum class RingStep {
  kStartRead,   // start reading the sub-group's record into its buffer
  kWaitRead,    // wait until that read has completed
  kProcess,     // hand the buffer to the caller (the update)
  kStartWrite,  // start writing the buffer back to the sub-group's record
  kWaitWrite,   // wait until that write has completed (its buffer is free again)
};

struct RingAction {
  RingStep step = RingStep::kProcess;
  size_t group = 0;
  size_t buffer = 0;
  friend bool operator==(const RingAction&, const RingAction&) = default;
};

// Sub-groups read ahead of the one being processed: buffers - 1 when nothing is written back,
// else buffers - 2 (one buffer is being processed, one written), at least 1 when buffers >= 2.
size_t ReadAhead(size_t buffers, RingMode mode);

// The actions for `groups` sub-groups through `buffers` buffers (>= 1; DSLAUNCH_CHECKed), ending
// with every write waited for. No actions for 0 groups or a mode that neither reads nor writes
// other than kProcess of each group.
std::vector<RingAction> PlanRing(size_t groups, size_t buffers, RingMode mode);

// "StartRead(g=1,b=1)" and such: for test failure messages.
std::string ToString(const RingAction& action);

}  // namespace dslaunch::runtime::swap
