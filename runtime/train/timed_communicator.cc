#include "runtime/train/timed_communicator.h"

namespace dslaunch::runtime {

TimedCommunicator::TimedCommunicator(Communicator& inner)
    : Communicator(inner.rank(), inner.world_size()), inner_(inner) {}

template <class Call>
Status TimedCommunicator::Timed(Call&& call) {
  const Clock::time_point start = Clock::now();
  Status status = call();
  in_collectives_ += Clock::now() - start;
  return status;
}

Status TimedCommunicator::DoAllReduce(BufferView data, ReduceOp op) {
  return Timed([&] { return inner_.AllReduce(data, op); });
}

Status TimedCommunicator::DoReduceScatter(ConstBufferView input, BufferView output,
                                          const std::vector<size_t>& counts, ReduceOp op) {
  return Timed([&] { return inner_.ReduceScatter(input, output, counts, op); });
}

Status TimedCommunicator::DoAllGather(ConstBufferView input, BufferView output, const std::vector<size_t>& counts) {
  return Timed([&] { return inner_.AllGather(input, output, counts); });
}

Status TimedCommunicator::DoBroadcast(BufferView data, int root) {
  return Timed([&] { return inner_.Broadcast(data, root); });
}

Status TimedCommunicator::DoBarrier() {
  return Timed([&] { return inner_.Barrier(); });
}

Status TimedCommunicator::DoSend(ConstBufferView data, int peer) {
  return Timed([&] { return inner_.Send(data, peer); });
}

Status TimedCommunicator::DoRecv(BufferView data, int peer) {
  return Timed([&] { return inner_.Recv(data, peer); });
}

Status TimedCommunicator::DoFlushSends() {
  return Timed([&] { return inner_.FlushSends(); });
}

}  // namespace dslaunch::runtime
