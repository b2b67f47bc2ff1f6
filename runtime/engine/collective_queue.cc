#include "runtime/engine/collective_queue.h"

#include <utility>

namespace dslaunch::runtime {

CollectiveQueue::CollectiveQueue(bool threaded) : threaded_(threaded) {
  if (threaded_) thread_ = std::thread([this] { Run(); });
}

CollectiveQueue::~CollectiveQueue() {
  if (!threaded_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
  }
  work_.notify_one();
  thread_.join();
}

CollectiveQueue::Ticket CollectiveQueue::Submit(Job job) {
  if (!threaded_) {
    ++submitted_;
    if (first_failure_.ok()) first_failure_ = job();
    ++finished_;
    return submitted_;
  }
  Ticket ticket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
    ticket = ++submitted_;
  }
  work_.notify_one();
  return ticket;
}

void CollectiveQueue::WaitFor(Ticket ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return finished_ >= ticket; });
}

Status CollectiveQueue::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return finished_ == submitted_; });
  return first_failure_;
}

// The queue's thread: the jobs in order; after the first failure the rest are skipped. Closing
// waits for the queue to empty first.
void CollectiveQueue::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_.wait(lock, [&] { return closing_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // closing, and nothing left
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    const bool skip = !first_failure_.ok();
    lock.unlock();
    Status status = skip ? Status::Ok() : job();
    job = nullptr;  // what the job holds goes before it is reported done
    lock.lock();
    if (first_failure_.ok() && !status.ok()) first_failure_ = std::move(status);
    ++finished_;
    done_.notify_all();
  }
}

QueuedCommunicator::QueuedCommunicator(Communicator& inner, CollectiveQueue& queue)
    : Communicator(inner.rank(), inner.world_size()), inner_(inner), queue_(queue) {}

Status QueuedCommunicator::DoAllReduce(BufferView data, ReduceOp op) {
  DSLAUNCH_RETURN_IF_ERROR(queue_.Drain());
  return inner_.AllReduce(data, op);
}

Status QueuedCommunicator::DoReduceScatter(ConstBufferView input, BufferView output,
                                           const std::vector<size_t>& counts, ReduceOp op) {
  DSLAUNCH_RETURN_IF_ERROR(queue_.Drain());
  return inner_.ReduceScatter(input, output, counts, op);
}

Status QueuedCommunicator::DoAllGather(ConstBufferView input, BufferView output, const std::vector<size_t>& counts) {
  DSLAUNCH_RETURN_IF_ERROR(queue_.Drain());
  return inner_.AllGather(input, output, counts);
}

Status QueuedCommunicator::DoBroadcast(BufferView data, int root) {
  DSLAUNCH_RETURN_IF_ERROR(queue_.Drain());
  return inner_.Broadcast(data, root);
}

Status QueuedCommunicator::DoBarrier() {
  DSLAUNCH_RETURN_IF_ERROR(queue_.Drain());
  return inner_.Barrier();
}

Status QueuedCommunicator::DoSend(ConstBufferView data, int peer) {
  DSLAUNCH_RETURN_IF_ERROR(queue_.Drain());
  return inner_.Send(data, peer);
}

Status QueuedCommunicator::DoRecv(BufferView data, int peer) {
  DSLAUNCH_RETURN_IF_ERROR(queue_.Drain());
  return inner_.Recv(data, peer);
}

Status QueuedCommunicator::DoFlushSends() {
  DSLAUNCH_RETURN_IF_ERROR(queue_.Drain());
  return inner_.FlushSends();
}

}  // namespace dslaunch::runtime
