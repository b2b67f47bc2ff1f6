// CollectiveQueue: the gradient reduction's collectives, run in the background while the
// backward pass goes on (zero_optimization.overlap_comm, docs/engine.md "Overlapped reduction").
//
// Jobs run one at a time in the order submitted, on one thread of the queue's own when it is
// threaded, or at once inside Submit when it is not (overlap_comm false, or one rank): the
// collectives and their order are the same either way, so every rank makes the same calls in
// the same order as the communicator requires. The first job that fails is kept; the jobs after
// it are skipped (a failed communicator would only fail them too). The engine's own thread uses
// the communicator only through QueuedCommunicator, which first waits for the queue, so the
// communicator is never used by two threads at once.
//
// Submit, WaitFor and Drain are for one owner thread. The destructor waits for every job.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "runtime/comm/communicator.h"

namespace dslaunch::runtime {

class CollectiveQueue {
 public:
  using Job = std::function<Status()>;
  using Ticket = uint64_t;

  explicit CollectiveQueue(bool threaded);
  ~CollectiveQueue();
  CollectiveQueue(const CollectiveQueue&) = delete;
  CollectiveQueue& operator=(const CollectiveQueue&) = delete;

  bool threaded() const { return threaded_; }
  // Queues `job` (runs it now when not threaded); the ticket names it for WaitFor.
  Ticket Submit(Job job);
  // Returns once job `ticket` and every job before it are done.
  void WaitFor(Ticket ticket);
  // Returns once every job submitted is done: OK, or the first failure of any job so far.
  Status Drain();

 private:
  void Run();

  const bool threaded_;
  std::mutex mu_;
  std::condition_variable work_;  // a job was queued, or the queue is closing
  std::condition_variable done_;  // a job finished
  std::deque<Job> jobs_;
  Ticket submitted_ = 0;  // tickets are 1, 2, ...: job n is the n-th submitted
  Ticket finished_ = 0;
  bool closing_ = false;
  Status first_failure_;
  std::thread thread_;  // last: started once the rest is built
};

// The communicator for the engine's own thread while a CollectiveQueue may hold jobs: each
// collective first waits for the queue to empty (failing with the queue's first failure, if a
// job failed), then calls `inner`, which the queue's jobs use directly. `inner` and `queue` must
// outlive it.
class QueuedCommunicator final : public Communicator {
 public:
  QueuedCommunicator(Communicator& inner, CollectiveQueue& queue);

  bool CanReduce(DType dtype) const override { return inner_.CanReduce(dtype); }
  std::string Describe() const override { return inner_.Describe(); }

 protected:
  Status DoAllReduce(BufferView data, ReduceOp op) override;
  Status DoReduceScatter(ConstBufferView input, BufferView output, const std::vector<size_t>& counts,
                         ReduceOp op) override;
  Status DoAllGather(ConstBufferView input, BufferView output, const std::vector<size_t>& counts) override;
  Status DoBroadcast(BufferView data, int root) override;
  Status DoBarrier() override;
  Status DoSend(ConstBufferView data, int peer) override;
  Status DoRecv(BufferView data, int peer) override;
  Status DoFlushSends() override;

 private:
  Communicator& inner_;
  CollectiveQueue& queue_;
};

}  // namespace dslaunch::runtime
