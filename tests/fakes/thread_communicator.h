// ThreadCommunicator: an in-process Communicator for unit tests of the engine. A
// ThreadCommunicatorGroup holds N ranks that share memory; each rank's communicator is driven by
// its own thread. Results are deterministic: reductions add in rank order 0, 1, ..., N-1, so
// identical inputs give bit-identical outputs on every run (Gloo's ring order may differ in the
// last bits; compare with a tolerance or use integer-valued floats).
//
// Faults: Kill(rank) or FaultOptions make a rank "die": the dead rank's call returns kAborted, and
// every other rank blocked in (or entering) a collective returns kAborted naming it
// ("rank 2 (thread) died"). A rank that never arrives makes the others fail with kAborted naming
// the missing ranks after `timeout`. Mismatched calls (different op, dtype or counts) are
// kInternal. Send and Recv go through per-link mailboxes (a send never waits); a Recv of a
// different size than the message is kInternal, one with no message within `timeout` kAborted.
//
// Thread-safety: the group is thread-safe; each communicator is used by one thread. The group must
// outlive its communicators.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"

namespace dslaunch::runtime::testing {

struct ThreadFaultOptions {
  // This rank dies when it enters its `die_at_call`-th collective (0-based), if set.
  std::optional<int> die_rank;
  int die_at_call = 0;
};

class ThreadCommunicatorGroup {
 public:
  // A peer that stalls longer than this is reported; short, because tests wait for it.
  static constexpr std::chrono::milliseconds kDefaultTimeout{2000};

  explicit ThreadCommunicatorGroup(int world_size,
                                   std::chrono::milliseconds timeout = kDefaultTimeout,
                                   ThreadFaultOptions faults = {});

  int world_size() const { return world_size_; }
  // The communicator of `rank`; owned by the group.
  Communicator& Get(int rank);
  // Marks `rank` dead: every rank's pending and later collectives fail with kAborted naming it.
  void Kill(int rank);
  // Waits until `rank` has entered its first collective (it is blocked in it, or past it); false
  // if it has not within `timeout`. Lets a test act on a rank known to be blocked.
  bool WaitUntilEntered(int rank, std::chrono::milliseconds timeout);

 private:
  friend class ThreadCommunicator;

  // What one rank brings to a collective.
  struct Post {
    int kind = 0;
    int op = 0;
    DType dtype = DType::kFloat32;
    size_t count = 0;  // input elements
    std::vector<size_t> counts;
    int root = 0;
    const void* input = nullptr;
  };

  // Waits until all ranks reach barrier phase `phase` of their current call; kAborted naming a
  // dead or missing rank otherwise. Caller holds `lock`.
  Status Arrive(std::unique_lock<std::mutex>& lock, int rank, uint64_t phase);
  Status DeadError() const;  // caller holds mu_

  const int world_size_;
  const std::chrono::milliseconds timeout_;
  const ThreadFaultOptions faults_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint64_t> phase_;  // per rank: barrier phases passed; guarded by mu_
  std::vector<Post> posts_;      // guarded by mu_ between phases
  std::vector<bool> dead_;       // guarded by mu_
  // Point-to-point messages not yet received, per (from, to), in the order sent; guarded by mu_.
  std::map<std::pair<int, int>, std::deque<std::vector<char>>> mail_;
  std::vector<std::unique_ptr<Communicator>> comms_;
};

}  // namespace dslaunch::runtime::testing
