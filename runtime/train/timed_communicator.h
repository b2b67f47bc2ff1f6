// TimedCommunicator: a Communicator that passes every collective to another one and adds up the
// wall time this rank spent inside them: moving data and waiting for the slowest peer. The
// training loop wraps its communicator in one, so that a step's time splits into time in
// collectives and the rest, this rank's own work (the step record's rank_collective_ms,
// docs/engine.md "Metrics"): ranks leave each collective together, so their step times are alike,
// and a straggler shows in the rest instead.
//
// The calls, their order, arguments and results are the inner communicator's: the numerics are
// untouched. Errors are the inner's (and make this one unusable too, as any communicator after an
// error). `inner` must outlive it. Not thread-safe, as any communicator.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"

namespace dslaunch::runtime {

class TimedCommunicator final : public Communicator {
 public:
  using Clock = std::chrono::steady_clock;

  explicit TimedCommunicator(Communicator& inner);

  // Time spent inside collectives since construction.
  Clock::duration in_collectives() const { return in_collectives_; }

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
  // Runs `call`, adding its wall time.
  template <class Call>
  Status Timed(Call&& call);

  Communicator& inner_;
  Clock::duration in_collectives_{};
};

}  // namespace dslaunch::runtime
