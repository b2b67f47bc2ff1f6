#include "runtime/engine/gradient_reducer.h"

#include <algorithm>
#include <cstdint>

#include "common/check.h"
#include "runtime/engine/storage_type.h"

namespace dslaunch::runtime {

template <class S>
GradientReducer<S>::GradientReducer(const ParameterLayout& layout, Communicator& comm, const ZeroConfig& zero,
                                    bool partitioned, const ShardMap& shards, ScratchBuffers& scratch,
                                    DeferredStatus& deferred, CollectiveQueue& queue)
    : layout_(layout),
      comm_(comm),
      partitioned_(partitioned),
      shards_(shards),
      scratch_(scratch),
      deferred_(deferred),
      queue_(queue),
      grads_(partitioned ? shards.own().size() : shards.numel(), S{}),
      groups_(layout.groups().size()) {
  size_t largest_group = 0;
  for (const auto& g : layout.groups()) largest_group = std::max(largest_group, g.numel);
  const size_t numel = shards.numel();
  bucket_capacity_ = std::max<size_t>(
      largest_group, std::min<size_t>(numel, static_cast<size_t>(std::max<int64_t>(1, zero.reduce_bucket_size))));
}

template <class S>
GradientReducer<S>::~GradientReducer() {
  (void)queue_.Drain();  // queued jobs read and write this reducer's buffers
}

template <class S>
void GradientReducer<S>::BeginStep(int micro_steps) {
  DSLAUNCH_CHECK(micro_steps >= 1) << "a step needs at least one micro-step, got " << micro_steps;
  std::fill(grads_.begin(), grads_.end(), S{});
  scratch_.Give(std::move(step_));  // left by a step that failed before its update
  run_lo_ = run_hi_ = 0;
  ready_count_ = 0;
  micro_steps_left_ = micro_steps;
}

template <class S>
bool GradientReducer<S>::ReducesNow() const {
  return partitioned_ || (shards_.partitioned() && micro_steps_left_ == 1);
}

template <class S>
std::span<float> GradientReducer<S>::Gradient(int g) {
  const ParameterGroup& group = Info(g);
  if constexpr (kIsFp32Storage<S>) {  // the model accumulates into the whole fp32 gradient
    if (!partitioned_) return {grads_.data() + group.offset, group.numel};
  }
  Group& st = groups_[static_cast<size_t>(g)];
  if (!st.active) {
    st.grad = scratch_.Take(group.numel);  // zeroed
    st.active = true;
  }
  return st.grad;
}

template <class S>
void GradientReducer<S>::GradientReady(int g) {
  const ParameterGroup& group = Info(g);
  Group& st = groups_[static_cast<size_t>(g)];
  const bool reduce = ReducesNow();
  if (st.active) {
    if (partitioned_) {
      AddToRun(group, st.grad);
    } else {
      AddInto<S>(st.grad, std::span<S>(grads_.data() + group.offset, group.numel));
    }
    scratch_.Give(std::move(st.grad));
    st.active = false;
  }
  if (reduce && !partitioned_) AddToRun(group, {});  // ZeRO 1: the group's whole gradient is final
  if (++ready_count_ == static_cast<int>(groups_.size())) {  // the last group of this micro-step
    if (reduce) SubmitRun();
    ready_count_ = 0;
    --micro_steps_left_;
  }
}

template <class S>
typename GradientReducer<S>::Slot& GradientReducer<S>::FreeSlot() {
  Slot& slot = slots_[filling_];
  queue_.WaitFor(slot.ticket);
  if (slot.input.size() < bucket_capacity_) slot.input.resize(bucket_capacity_);
  return slot;
}

// Groups arrive from the backward pass in descending flat order, so a run [run_lo_, run_hi_)
// grows downwards; at ZeRO 2-3 it is laid out at the end of the filling bucket.
template <class S>
void GradientReducer<S>::AddToRun(const ParameterGroup& group, std::span<const float> grad) {
  const size_t lo = group.offset, hi = group.offset + group.numel;
  if (run_hi_ != run_lo_ && (hi != run_lo_ || run_hi_ - lo > bucket_capacity_)) SubmitRun();
  if (run_hi_ == run_lo_) {
    run_hi_ = hi;
    if (partitioned_) FreeSlot();
  }
  run_lo_ = lo;
  if (partitioned_) {
    std::vector<float>& bucket = slots_[filling_].input;
    std::copy(grad.begin(), grad.end(), bucket.begin() + static_cast<std::ptrdiff_t>(bucket_capacity_ - (run_hi_ - lo)));
  }
}

// The pending run reduce-scattered (average) by a queued job: at ZeRO 2-3 the filling bucket,
// with this rank's part added to its slice; at ZeRO 1 the whole gradient's range (16-bit
// converted into a staging slot first), into the step's slice.
template <class S>
void GradientReducer<S>::SubmitRun() {
  const size_t lo = run_lo_, hi = run_hi_;
  run_lo_ = run_hi_ = 0;
  if (hi == lo) return;
  const ShardRange own = shards_.OwnPart(lo, hi);
  const size_t at = own.size() == 0 ? 0 : own.begin - shards_.own().begin;  // in the owned slice
  Communicator& comm = comm_;
  const int slot_count = queue_.threaded() ? 2 : 1;
  if (partitioned_) {
    Slot& slot = slots_[filling_];
    const std::span<const float> input(slot.input.data() + (bucket_capacity_ - (hi - lo)), hi - lo);
    const std::span<S> into(grads_.data() + at, own.size());
    largest_part_ = std::max(largest_part_, own.size());
    slot.ticket = queue_.Submit([&comm, input, into, counts = shards_.Counts(lo, hi)] {
      std::vector<float> reduced(into.size());  // this job's, freed when it ends
      DSLAUNCH_RETURN_IF_ERROR(comm.ReduceScatter(input, std::span<float>(reduced), counts, ReduceOp::kAvg)
                                   .WithContext("gradient reduce-scatter"));
      AddInto<S>(reduced, into);
      return Status::Ok();
    });
    filling_ = (filling_ + 1) % slot_count;
    return;
  }
  if (step_.empty()) step_ = scratch_.Take(shards_.own().size());
  const std::span<float> out(step_.data() + at, own.size());
  const std::span<const S> values(grads_.data() + lo, hi - lo);
  if constexpr (kIsFp32Storage<S>) {
    queue_.Submit([&comm, values, out, counts = shards_.Counts(lo, hi)] {
      return comm.ReduceScatter(values, out, counts, ReduceOp::kAvg).WithContext("gradient reduce-scatter");
    });
  } else {
    Slot& slot = FreeSlot();
    const std::span<float> staging(slot.input.data(), hi - lo);
    slot.ticket = queue_.Submit([&comm, values, staging, out, counts = shards_.Counts(lo, hi)] {
      ToFloat(values, staging);
      return comm.ReduceScatter(std::span<const float>(staging), out, counts, ReduceOp::kAvg)
          .WithContext("gradient reduce-scatter");
    });
    filling_ = (filling_ + 1) % slot_count;
  }
}

template <class S>
void GradientReducer<S>::Finish() {
  SubmitRun();
  deferred_.Record(queue_.Drain());
}

template <class S>
void GradientReducer<S>::CheckAllReady() const {
  for (const Group& g : groups_) DSLAUNCH_CHECK(!g.active) << "a group's gradient was never reported ready";
  DSLAUNCH_CHECK(micro_steps_left_ == 0 && ready_count_ == 0)
      << "the step ran a different number of micro-steps than BeginStep announced, or one reported only "
      << ready_count_ << " of " << groups_.size() << " groups ready (" << micro_steps_left_ << " micro-steps left)";
}

template <class S>
Result<StepGradient> GradientReducer<S>::ReduceForStep() {
  if (partitioned_) return OwnedSlice();  // reduced already, during backward
  if (shards_.partitioned()) return StepGradient::Owning(std::move(step_));  // ZeRO 1: in the last backward
  return AllReduceWhole();
}

template <class S>
size_t GradientReducer<S>::bucket_bytes() const {
  size_t floats = 0;
  for (const Slot& slot : slots_) {
    floats += slot.input.capacity();
    if (!slot.input.empty()) floats += largest_part_;  // the reduced part of its job
  }
  return floats * sizeof(float);
}

template <class S>
StepGradient GradientReducer<S>::OwnedSlice() {
  if constexpr (kIsFp32Storage<S>) {
    return StepGradient::View(grads_);
  } else {
    return StepGradient::Converting(std::span<const S>(grads_));
  }
}

// ZeRO 0: the whole gradient, all-reduced chunk by chunk (fp32 where it is; 16-bit converted into
// the step's buffer first).
template <class S>
Result<StepGradient> GradientReducer<S>::AllReduceWhole() {
  std::vector<float> buffer;
  std::span<float> values;
  if constexpr (kIsFp32Storage<S>) {
    values = grads_;
  } else {
    buffer = scratch_.Take(grads_.size());
    values = buffer;
  }
  const size_t numel = shards_.numel();
  Status status = Status::Ok();
  for (size_t lo = 0; lo < numel && status.ok(); lo += bucket_capacity_) {
    const size_t hi = std::min(numel, lo + bucket_capacity_);
    std::span<float> chunk = values.subspan(lo, hi - lo);
    if constexpr (!kIsFp32Storage<S>) ToFloat(std::span<const S>(grads_.data() + lo, hi - lo), chunk);
    status = comm_.AllReduce(chunk, ReduceOp::kAvg).WithContext("gradient all-reduce");
  }
  if (!status.ok()) {
    scratch_.Give(std::move(buffer));
    return status;
  }
  return kIsFp32Storage<S> ? StepGradient::View(values) : StepGradient::Owning(std::move(buffer));
}

template <class S>
Result<double> GradientReducer<S>::GlobalSumOfSquares(const StepGradient& gradient, std::span<const ShardRange> skip) {
  // The step's gradient holds the owned slice: the ranges to skip, relative to its start.
  std::vector<ShardRange> mine;
  for (const ShardRange& range : skip) {
    const ShardRange part = shards_.OwnPart(range.begin, range.end);
    if (!part.empty()) mine.push_back({part.begin - shards_.own().begin, part.end - shards_.own().begin});
  }
  double sum = gradient.SumOfSquares(mine);
  if (!shards_.partitioned()) return sum;  // every rank holds the whole gradient
  float partial = static_cast<float>(sum);
  DSLAUNCH_RETURN_IF_ERROR(
      comm_.AllReduce(std::span<float>(&partial, 1), ReduceOp::kSum).WithContext("gradient norm"));
  return static_cast<double>(partial);
}

template class GradientReducer<float>;
template class GradientReducer<Half>;
template class GradientReducer<BFloat16>;

}  // namespace dslaunch::runtime
