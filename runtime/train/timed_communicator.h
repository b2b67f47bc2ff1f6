// TimedCommunicator: a Communicator that forwards every collective to another and adds up the
// wall time spent inside them. The training loop reports a step's time outside collectives
// (`compute_ms` of its progress reports, docs/observability.md): in synchronous training every
// rank waits for the slowest at each collective, so the wall time of a step is the same on every
// rank, and only the time outside collectives shows which rank is slow. Not thread-safe (as the
// communicator it wraps); `inner` must outlive it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"

namespace dslaunch::runtime {

class TimedCommunicator : public Communicator {
 public:
  explicit TimedCommunicator(Communicator& inner)
      : Communicator(inner.rank(), inner.world_size()), inner_(inner) {}

  // Seconds spent inside collectives so far.
  double seconds() const { return seconds_; }

  bool CanReduce(DType dtype) const override { return inner_.CanReduce(dtype); }
  std::string Describe() const override { return inner_.Describe(); }

 protected:
  Status DoAllReduce(BufferView data, ReduceOp op) override {
    return Timed([&] { return inner_.AllReduce(data, op); });
  }
  Status DoReduceScatter(ConstBufferView input, BufferView output, const std::vector<size_t>& counts,
                         ReduceOp op) override {
    return Timed([&] { return inner_.ReduceScatter(input, output, counts, op); });
  }
  Status DoAllGather(ConstBufferView input, BufferView output, const std::vector<size_t>& counts) override {
    return Timed([&] { return inner_.AllGather(input, output, counts); });
  }
  Status DoBroadcast(BufferView data, int root) override {
    return Timed([&] { return inner_.Broadcast(data, root); });
  }
  Status DoBarrier() override {
    return Timed([&] { return inner_.Barrier(); });
  }

 private:
  template <typename F>
  Status Timed(F collective) {
    const auto start = std::chrono::steady_clock::now();
    Status s = collective();
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return s;
  }

  Communicator& inner_;
  double seconds_ = 0;
};

}  // namespace dslaunch::runtime
