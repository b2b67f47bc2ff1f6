#include "tests/fakes/thread_communicator.h"

#include <algorithm>
#include <cstring>

namespace dslaunch::runtime::testing {
namespace {

enum Kind { kAllReduce = 1, kReduceScatter, kAllGather, kBroadcast, kBarrier };

// Reduces fp32 element `i` of every rank's input in rank order into out[j].
void ReduceFloats(const std::vector<const float*>& inputs, size_t begin, size_t count, ReduceOp op,
                  float* out) {
  for (size_t j = 0; j < count; ++j) {
    float acc = inputs[0][begin + j];
    for (size_t r = 1; r < inputs.size(); ++r) {
      const float v = inputs[r][begin + j];
      acc = op == ReduceOp::kMax ? std::max(acc, v) : acc + v;
    }
    out[j] = acc;
  }
}

}  // namespace

class ThreadCommunicator : public Communicator {
 public:
  ThreadCommunicator(ThreadCommunicatorGroup& group, int rank)
      : Communicator(rank, group.world_size()), group_(group) {}

  std::string Describe() const override {
    return "thread rank " + std::to_string(rank()) + "/" + std::to_string(world_size());
  }

 protected:
  Status DoAllReduce(BufferView data, ReduceOp op) override {
    auto post = MakePost(kAllReduce, op, data.dtype, data.count, {}, 0, data.data);
    return Run(post, data, [&](const auto& posts, std::vector<char>& out) {
      out.resize(data.bytes());
      ReduceFloats(Inputs(posts), 0, data.count, op, reinterpret_cast<float*>(out.data()));
      if (op == ReduceOp::kAvg) {
        ScaleFloats({out.data(), data.count, data.dtype}, 1.0f / world_size());
      }
    });
  }

  Status DoReduceScatter(ConstBufferView input, BufferView output,
                         const std::vector<size_t>& counts, ReduceOp op) override {
    auto post = MakePost(kReduceScatter, op, input.dtype, input.count, counts, 0, input.data);
    return Run(post, output, [&](const auto& posts, std::vector<char>& out) {
      out.resize(output.bytes());
      const size_t begin = BlockOffsets(counts)[rank()];
      ReduceFloats(Inputs(posts), begin, output.count, op, reinterpret_cast<float*>(out.data()));
      if (op == ReduceOp::kAvg) {
        ScaleFloats({out.data(), output.count, output.dtype}, 1.0f / world_size());
      }
    });
  }

  Status DoAllGather(ConstBufferView input, BufferView output,
                     const std::vector<size_t>& counts) override {
    auto post =
        MakePost(kAllGather, ReduceOp::kSum, input.dtype, output.count, counts, 0, input.data);
    return Run(post, output, [&](const auto& posts, std::vector<char>& out) {
      out.resize(output.bytes());
      const size_t elem = DTypeSize(output.dtype);
      const std::vector<size_t> offsets = BlockOffsets(counts);
      for (int r = 0; r < world_size(); ++r) {
        if (counts[r] == 0) continue;
        std::memcpy(out.data() + offsets[r] * elem, posts[r].input, counts[r] * elem);
      }
    });
  }

  Status DoBroadcast(BufferView data, int root) override {
    auto post = MakePost(kBroadcast, ReduceOp::kSum, data.dtype, data.count, {}, root, data.data);
    return Run(post, data, [&](const auto& posts, std::vector<char>& out) {
      const char* src = static_cast<const char*>(posts[root].input);
      out.assign(src, src + data.bytes());
    });
  }

  Status DoBarrier() override {
    auto post = MakePost(kBarrier, ReduceOp::kSum, DType::kFloat32, 0, {}, 0, nullptr);
    return Run(post, BufferView{}, [](const auto&, std::vector<char>&) {});
  }

  Status DoSend(ConstBufferView data, int peer) override {
    std::lock_guard lock(group_.mu_);
    DSLAUNCH_RETURN_IF_ERROR(group_.DeadError());
    const char* bytes = static_cast<const char*>(data.data);
    group_.mail_[{rank(), peer}].emplace_back(bytes, bytes + data.bytes());
    group_.cv_.notify_all();
    return Status::Ok();
  }

  Status DoRecv(BufferView data, int peer) override {
    std::unique_lock lock(group_.mu_);
    auto& box = group_.mail_[{peer, rank()}];
    if (!group_.cv_.wait_for(lock, group_.timeout_, [&] { return !box.empty() || !group_.DeadError().ok(); })) {
      return AbortedError("rank " + std::to_string(peer) + " (thread) sent nothing to rank " + std::to_string(rank()) +
                          " within " + std::to_string(group_.timeout_.count()) + " ms");
    }
    if (box.empty()) return group_.DeadError();
    std::vector<char> message = std::move(box.front());
    box.pop_front();
    if (message.size() != data.bytes()) {
      return InternalError(Describe() + ": a message of " + std::to_string(message.size()) + " bytes from rank " +
                           std::to_string(peer) + " received as " + std::to_string(data.bytes()));
    }
    std::memcpy(data.data, message.data(), message.size());
    return Status::Ok();
  }

  Status DoFlushSends() override { return Status::Ok(); }  // a mailbox holds what was sent

 private:
  static ThreadCommunicatorGroup::Post MakePost(int kind, ReduceOp op, DType dtype, size_t count,
                                                std::vector<size_t> counts, int root,
                                                const void* input) {
    ThreadCommunicatorGroup::Post post;
    post.kind = kind;
    post.op = static_cast<int>(op);
    post.dtype = dtype;
    post.count = count;
    post.counts = std::move(counts);
    post.root = root;
    post.input = input;
    return post;
  }

  static std::vector<const float*> Inputs(const std::vector<ThreadCommunicatorGroup::Post>& posts) {
    std::vector<const float*> inputs;
    for (const auto& p : posts) inputs.push_back(static_cast<const float*>(p.input));
    return inputs;
  }

  // Posts this rank's arguments, meets the others (phase A), computes this rank's result from
  // everyone's inputs into a scratch buffer, meets them again (phase B: nobody's input is read
  // after it) and only then writes `output`, so in-place calls are safe.
  template <typename Compute>
  Status Run(ThreadCommunicatorGroup::Post post, BufferView output, Compute compute) {
    const int call = calls_++;
    std::unique_lock lock(group_.mu_);
    if (group_.faults_.die_rank == rank() && group_.faults_.die_at_call == call) {
      group_.dead_[rank()] = true;
      group_.cv_.notify_all();
      return AbortedError("rank " + std::to_string(rank()) + " (thread): injected death");
    }
    group_.posts_[rank()] = post;
    DSLAUNCH_RETURN_IF_ERROR(group_.Arrive(lock, rank(), 2 * call + 1));
    const auto& posts = group_.posts_;
    for (int r = 0; r < world_size(); ++r) {
      const auto& p = posts[r];
      if (p.kind != post.kind || p.op != post.op || p.dtype != post.dtype ||
          p.counts != post.counts || p.root != post.root || p.count != post.count) {
        return InternalError(Describe() + ": call " + std::to_string(call) +
                             " does not match the call of rank " + std::to_string(r));
      }
    }
    lock.unlock();
    std::vector<char> out;
    compute(posts, out);
    lock.lock();
    DSLAUNCH_RETURN_IF_ERROR(group_.Arrive(lock, rank(), 2 * call + 2));
    lock.unlock();
    if (!out.empty()) std::memcpy(output.data, out.data(), out.size());
    return Status::Ok();
  }

  ThreadCommunicatorGroup& group_;
  int calls_ = 0;
};

ThreadCommunicatorGroup::ThreadCommunicatorGroup(int world_size, std::chrono::milliseconds timeout,
                                                 ThreadFaultOptions faults)
    : world_size_(world_size),
      timeout_(timeout),
      faults_(faults),
      phase_(world_size, 0),
      posts_(world_size),
      dead_(world_size, false) {
  for (int r = 0; r < world_size; ++r) {
    comms_.push_back(std::make_unique<ThreadCommunicator>(*this, r));
  }
}

Communicator& ThreadCommunicatorGroup::Get(int rank) {
  return *comms_.at(rank);
}

void ThreadCommunicatorGroup::Kill(int rank) {
  std::lock_guard lock(mu_);
  dead_.at(rank) = true;
  cv_.notify_all();
}

bool ThreadCommunicatorGroup::WaitUntilEntered(int rank, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return phase_.at(rank) >= 1; });
}

Status ThreadCommunicatorGroup::DeadError() const {
  for (int r = 0; r < world_size_; ++r) {
    if (dead_[r]) return AbortedError("rank " + std::to_string(r) + " (thread) died");
  }
  return Status::Ok();
}

Status ThreadCommunicatorGroup::Arrive(std::unique_lock<std::mutex>& lock, int rank,
                                       uint64_t phase) {
  phase_[rank] = phase;
  cv_.notify_all();
  auto all_here = [&] {
    return std::all_of(phase_.begin(), phase_.end(), [&](uint64_t p) { return p >= phase; });
  };
  const bool done = cv_.wait_for(lock, timeout_, [&] { return all_here() || !DeadError().ok(); });
  if (all_here()) return Status::Ok();
  if (!DeadError().ok()) return DeadError();
  DSLAUNCH_CHECK(!done);
  std::string missing;
  for (int r = 0; r < world_size_; ++r) {
    if (phase_[r] < phase) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  }
  return AbortedError("rank " + missing + " (thread) did not join within " +
                      std::to_string(timeout_.count()) + " ms");
}

}  // namespace dslaunch::runtime::testing
