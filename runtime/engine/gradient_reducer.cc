#include "runtime/engine/gradient_reducer.h"

#include <algorithm>
#include <cstdint>

#include "common/check.h"
#include "runtime/engine/storage_type.h"

namespace dslaunch::runtime {

template <class S>
GradientReducer<S>::GradientReducer(const ParameterLayout& layout, Communicator& comm, const ZeroConfig& zero,
                                    bool partitioned, const ShardMap& shards, ScratchBuffers& scratch,
                                    DeferredStatus& deferred)
    : layout_(layout),
      comm_(comm),
      partitioned_(partitioned),
      shards_(shards),
      scratch_(scratch),
      deferred_(deferred),
      grads_(partitioned ? shards.own().size() : shards.numel(), S{}),
      groups_(layout.groups().size()) {
  size_t largest_group = 0;
  for (const auto& g : layout.groups()) largest_group = std::max(largest_group, g.numel);
  const size_t numel = shards.numel();
  bucket_capacity_ = std::max<size_t>(
      largest_group, std::min<size_t>(numel, static_cast<size_t>(std::max<int64_t>(1, zero.reduce_bucket_size))));
}

template <class S>
void GradientReducer<S>::BeginStep() {
  std::fill(grads_.begin(), grads_.end(), S{});
  ready_count_ = 0;
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
  if (st.active) {
    if (partitioned_) {
      AppendToBucket(group, st.grad);
    } else {
      AddInto<S>(st.grad, std::span<S>(grads_.data() + group.offset, group.numel));
    }
    scratch_.Give(std::move(st.grad));
    st.active = false;
  }
  if (partitioned_ && ++ready_count_ == static_cast<int>(groups_.size())) {
    Flush();  // the last group of this micro-step's backward
    ready_count_ = 0;
  }
}

// Groups arrive from the backward pass in descending flat order; a bucket holds a contiguous run
// [bucket_lo_, bucket_hi_) laid out at the end of bucket_, so the run grows downwards.
template <class S>
void GradientReducer<S>::AppendToBucket(const ParameterGroup& group, std::span<const float> grad) {
  const size_t lo = group.offset, hi = group.offset + group.numel;
  const bool empty = bucket_hi_ == bucket_lo_;
  if (!empty && (hi != bucket_lo_ || bucket_hi_ - lo > bucket_capacity_)) Flush();
  if (bucket_hi_ == bucket_lo_) {
    if (bucket_.size() < bucket_capacity_) bucket_.resize(bucket_capacity_);
    bucket_hi_ = hi;
  }
  bucket_lo_ = lo;
  std::copy(grad.begin(), grad.end(), bucket_.begin() + static_cast<std::ptrdiff_t>(bucket_capacity_ - (bucket_hi_ - lo)));
}

// Reduce-scatters the bucket (average over ranks) and adds this rank's part to its slice.
template <class S>
void GradientReducer<S>::Flush() {
  const size_t lo = bucket_lo_, hi = bucket_hi_;
  bucket_lo_ = bucket_hi_ = 0;
  if (hi == lo) return;
  const ShardRange own = shards_.OwnPart(lo, hi);
  std::vector<float> reduced = scratch_.Take(own.size());
  deferred_.Record(comm_.ReduceScatter(std::span<const float>(bucket_.data() + (bucket_capacity_ - (hi - lo)), hi - lo),
                                       std::span<float>(reduced), shards_.Counts(lo, hi), ReduceOp::kAvg)
                       .WithContext("gradient reduce-scatter"));
  AddInto<S>(reduced, std::span<S>(grads_.data() + (own.begin - shards_.own().begin), own.size()));
  scratch_.Give(std::move(reduced));
}

template <class S>
void GradientReducer<S>::CheckAllReady() const {
  for (const Group& g : groups_) DSLAUNCH_CHECK(!g.active) << "a group's gradient was never reported ready";
}

template <class S>
Result<StepGradient> GradientReducer<S>::ReduceForStep() {
  if (partitioned_) return OwnedSlice();  // reduced already, during backward
  return shards_.partitioned() ? ReduceScatterWhole() : AllReduceWhole();
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

// ZeRO 1: the whole gradient reduce-scattered chunk by chunk into the owned slice (16-bit
// converted one chunk at a time).
template <class S>
Result<StepGradient> GradientReducer<S>::ReduceScatterWhole() {
  const size_t numel = shards_.numel();
  std::vector<float> buffer = scratch_.Take(shards_.own().size());
  const std::span<float> values = buffer;
  Status status = Status::Ok();
  std::vector<float> staging;
  if constexpr (!kIsFp32Storage<S>) staging = scratch_.Take(std::min(numel, bucket_capacity_));
  for (size_t lo = 0; lo < numel && status.ok(); lo += bucket_capacity_) {
    const size_t hi = std::min(numel, lo + bucket_capacity_);
    std::span<const float> input;
    if constexpr (kIsFp32Storage<S>) {
      input = std::span<const float>(grads_.data() + lo, hi - lo);
    } else {
      std::span<float> chunk(staging.data(), hi - lo);
      ToFloat(std::span<const S>(grads_.data() + lo, hi - lo), chunk);
      input = chunk;
    }
    const ShardRange own = shards_.OwnPart(lo, hi);
    status = comm_.ReduceScatter(input, values.subspan(own.begin - shards_.own().begin, own.size()),
                                 shards_.Counts(lo, hi), ReduceOp::kAvg)
                 .WithContext("gradient reduce-scatter");
  }
  scratch_.Give(std::move(staging));
  if (!status.ok()) {
    scratch_.Give(std::move(buffer));
    return status;
  }
  return StepGradient::Owning(std::move(buffer));
}

template <class S>
Result<double> GradientReducer<S>::GlobalSumOfSquares(const StepGradient& gradient) {
  double sum = gradient.SumOfSquares();
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
