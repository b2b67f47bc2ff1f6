// RecordingCommunicator: wraps another Communicator and records every collective made through it
// ("all_gather f32 [3,3,2]"), then forwards it. For tests that check which collectives a part of
// the engine makes, and in which order. Used by one thread, like the communicator it wraps.
#pragma once

#include <string>
#include <vector>

#include "runtime/comm/communicator.h"

namespace dslaunch::runtime::testing {

class RecordingCommunicator final : public Communicator {
 public:
  explicit RecordingCommunicator(Communicator& inner) : Communicator(inner.rank(), inner.world_size()), inner_(inner) {}

  // The collectives so far, one line each.
  const std::vector<std::string>& calls() const { return calls_; }
  void Clear() { calls_.clear(); }
  bool CanReduce(DType dtype) const override { return inner_.CanReduce(dtype); }
  std::string Describe() const override { return "recording " + inner_.Describe(); }

 protected:
  Status DoAllReduce(BufferView data, ReduceOp op) override {
    calls_.push_back("all_reduce " + std::string(ReduceOpName(op)) + " " + std::string(DTypeName(data.dtype)) + " " +
                     std::to_string(data.count));
    return inner_.AllReduce(data, op);
  }
  Status DoReduceScatter(ConstBufferView input, BufferView output, const std::vector<size_t>& counts,
                         ReduceOp op) override {
    calls_.push_back("reduce_scatter " + std::string(ReduceOpName(op)) + " " + std::string(DTypeName(input.dtype)) +
                     " " + Counts(counts));
    return inner_.ReduceScatter(input, output, counts, op);
  }
  Status DoAllGather(ConstBufferView input, BufferView output, const std::vector<size_t>& counts) override {
    calls_.push_back("all_gather " + std::string(DTypeName(input.dtype)) + " " + Counts(counts));
    return inner_.AllGather(input, output, counts);
  }
  Status DoBroadcast(BufferView data, int root) override {
    calls_.push_back("broadcast " + std::string(DTypeName(data.dtype)) + " " + std::to_string(data.count) + " root " +
                     std::to_string(root));
    return inner_.Broadcast(data, root);
  }
  Status DoBarrier() override {
    calls_.push_back("barrier");
    return inner_.Barrier();
  }
  Status DoSend(ConstBufferView data, int peer) override {
    calls_.push_back("send " + std::to_string(data.count) + " to " + std::to_string(peer));
    return inner_.Send(data, peer);
  }
  Status DoRecv(BufferView data, int peer) override {
    calls_.push_back("recv " + std::to_string(data.count) + " from " + std::to_string(peer));
    return inner_.Recv(data, peer);
  }
  Status DoFlushSends() override {
    calls_.push_back("flush sends");
    return inner_.FlushSends();
  }

 private:
  static std::string Counts(const std::vector<size_t>& counts) {
    std::string s = "[";
    for (size_t i = 0; i < counts.size(); ++i) s += (i ? "," : "") + std::to_string(counts[i]);
    return s + "]";
  }

  Communicator& inner_;
  std::vector<std::string> calls_;
};

}  // namespace dslaunch::runtime::testing
