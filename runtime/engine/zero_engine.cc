#include "runtime/engine/zero_engine.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "common/check.h"
#include "runtime/core/sixteen_bit_float.h"
#include "runtime/core/partition.h"

namespace dslaunch::runtime {
namespace {

// Added to the norm before dividing, as DeepSpeed and PyTorch's clip_grad_norm_ do.
constexpr double kClipEpsilon = 1e-6;

// ---- Storage types: fp32, fp16 and bf16 behind one set of names. ----

template <class S>
constexpr DType kStorageDType = std::is_same_v<S, float> ? DType::kFloat32
                                : std::is_same_v<S, Half> ? DType::kFloat16
                                                          : DType::kBFloat16;

inline void ToFloat(std::span<const float> in, std::span<float> out) { std::copy(in.begin(), in.end(), out.begin()); }
inline void ToFloat(std::span<const Half> in, std::span<float> out) { HalfToFloat(in, out); }
inline void ToFloat(std::span<const BFloat16> in, std::span<float> out) { BFloat16ToFloat(in, out); }
inline void FromFloat(std::span<const float> in, std::span<float> out) { std::copy(in.begin(), in.end(), out.begin()); }
inline void FromFloat(std::span<const float> in, std::span<Half> out) { FloatToHalf(in, out); }
inline void FromFloat(std::span<const float> in, std::span<BFloat16> out) { FloatToBFloat16(in, out); }

// out += in, rounded to the storage type.
template <class S>
void AddInto(std::span<const float> in, std::span<S> out) {
  DSLAUNCH_CHECK(in.size() == out.size());
  if constexpr (std::is_same_v<S, float>) {
    for (size_t i = 0; i < in.size(); ++i) out[i] += in[i];
  } else {
    constexpr size_t kChunk = 4096;
    float tmp[kChunk];
    for (size_t at = 0; at < in.size(); at += kChunk) {
      const size_t n = std::min(kChunk, in.size() - at);
      ToFloat(std::span<const S>(out.data() + at, n), std::span<float>(tmp, n));
      for (size_t i = 0; i < n; ++i) tmp[i] += in[at + i];
      FromFloat(std::span<const float>(tmp, n), out.subspan(at, n));
    }
  }
}

template <class S>
ConstBufferView ConstView(const S* data, size_t count) {
  return {data, count, kStorageDType<S>};
}
template <class S>
BufferView MutableView(S* data, size_t count) {
  return {data, count, kStorageDType<S>};
}

double SumOfSquares(std::span<const float> v) {
  double sum = 0.0;
  for (float x : v) sum += static_cast<double>(x) * x;
  return sum;
}

// Transient fp32 buffers (acquired groups, micro-step gradients, the step's gradient), allocated
// when needed and freed after use, with the high-water mark of the bytes out at once.
class ScratchBuffers {
 public:
  std::vector<float> Take(size_t n) {
    current_ += n * sizeof(float);
    peak_ = std::max(peak_, current_);
    return std::vector<float>(n);
  }
  void Give(std::vector<float>&& v) {
    current_ -= v.size() * sizeof(float);
    v = std::vector<float>();
  }
  size_t peak() const { return peak_; }

 private:
  size_t current_ = 0;
  size_t peak_ = 0;
};

// ---- The engine. ----

template <class S>
class ZeroEngine final : public Engine, private ParameterAccess {
  static constexpr bool kFp32 = std::is_same_v<S, float>;

 public:
  ZeroEngine(const ParameterLayout& layout, Communicator& comm, const EngineOptions& options,
             std::span<const float> initial)
      : layout_(layout),
        comm_(comm),
        options_(options),
        stage_(options.zero.stage),
        numel_(layout.numel()),
        shard_(stage_ >= 1 ? ShardFor(numel_, comm.world_size(), comm.rank()) : ShardRange{0, numel_}),
        state_(OptimizerState::For(options.optimizer, shard_.size())),
        scaler_(options.precision == Precision::kFp16 ? options.loss_scaler : LossScalerConfig{}),
        groups_(layout.groups().size()) {
    for (int r = 0; r < comm.world_size(); ++r) {
      shards_.push_back(stage_ >= 1 ? ShardFor(numel_, comm.world_size(), r) : ShardRange{0, numel_});
    }
    // Parameters: whole (stages 0-2) or this rank's partition (stage 3) in the storage type.
    const ShardRange held = stage_ == 3 ? shard_ : ShardRange{0, numel_};
    params_.resize(held.size());
    FromFloat(initial.subspan(held.begin, held.size()), std::span<S>(params_));
    if constexpr (!kFp32) master_.assign(initial.begin() + shard_.begin, initial.begin() + shard_.end);
    // Gradients: whole (stages 0-1) or this rank's partition (stages 2-3).
    grads_.assign(stage_ >= 2 ? shard_.size() : numel_, S{});
    for (size_t g = 0; g < layout.groups().size(); ++g) {
      const auto& group = layout.groups()[g];
      if (stage_ == 3 && static_cast<int64_t>(group.numel) <= options.zero.stage3_param_persistence_threshold) {
        groups_[g].persistent.resize(group.numel);
        FromFloat(initial.subspan(group.offset, group.numel), std::span<S>(groups_[g].persistent));
      }
      for (const auto& t : group.tensors) {
        if (auto slice = IntersectParam(t.offset, t.numel, shard_)) {
          segments_.push_back({slice->shard_begin, slice->shard_begin + slice->numel, t.decay});
        }
      }
    }
    size_t largest_group = 0;
    for (const auto& g : layout.groups()) largest_group = std::max(largest_group, g.numel);
    bucket_capacity_ = std::max<size_t>(
        largest_group, std::min<size_t>(numel_, static_cast<size_t>(std::max<int64_t>(1, options.zero.reduce_bucket_size))));
  }

  ParameterAccess& access() override { return *this; }
  double loss_scale() const override { return options_.precision == Precision::kFp16 ? scaler_.scale() : 1.0; }
  Status status() const override { return deferred_; }
  int64_t applied_steps() const override { return applied_; }

  void BeginStep() override {
    std::fill(grads_.begin(), grads_.end(), S{});
    ready_count_ = 0;
  }

  Result<StepStats> Step() override {
    if (stage_ >= 2 && bucket_hi_ > bucket_lo_) FlushBucket();
    DSLAUNCH_RETURN_IF_ERROR(deferred_);
    for (const auto& g : groups_) DSLAUNCH_CHECK(!g.grad_active) << "a group's gradient was never reported ready";
    DropPrefetched();

    StepStats stats;
    stats.loss_scale = loss_scale();
    // The averaged gradient of the shard this rank updates, in fp32.
    std::vector<float> owned_grads;
    std::span<float> grads;
    DSLAUNCH_RETURN_IF_ERROR(ReduceForStep(owned_grads, grads));

    double sum = SumOfSquares(grads);
    if (stage_ >= 1) {
      float partial = static_cast<float>(sum);
      DSLAUNCH_RETURN_IF_ERROR(
          comm_.AllReduce(std::span<float>(&partial, 1), ReduceOp::kSum).WithContext("gradient norm"));
      sum = partial;
    }
    const double scale = stats.loss_scale;
    stats.grad_norm = std::sqrt(sum) / scale;
    stats.lr = LearningRateForAppliedSteps(options_.schedule, options_.optimizer.lr, applied_);
    const bool overflow = !std::isfinite(stats.grad_norm);
    if (options_.precision == Precision::kFp16) {
      StepDecision decision = scaler_.Update(overflow);
      if (decision.skip_step || decision.change != ScaleChange::kNone) stats.scale_event = decision.Describe();
      if (decision.fatal) {
        return FailedPreconditionError(decision.Describe() +
                                       ": fp16 gradients overflow even at fp16.min_loss_scale; lower the learning "
                                       "rate, or use bf16");
      }
      if (decision.skip_step) {
        stats.skipped = true;
        scratch_.Give(std::move(owned_grads));
        return stats;
      }
    } else if (overflow) {
      return FailedPreconditionError("gradient norm is " + std::to_string(stats.grad_norm) + " in " +
                                     std::string(PrecisionName(options_.precision)) +
                                     " training: the model diverged (lower the learning rate)");
    }
    double coef = 1.0 / scale;
    if (options_.gradient_clipping > 0 && stats.grad_norm > options_.gradient_clipping) {
      coef *= options_.gradient_clipping / (stats.grad_norm + kClipEpsilon);
    }
    if (coef != 1.0) {
      const float c = static_cast<float>(coef);
      for (float& g : grads) g *= c;
    }
    OptimizerStep(options_.optimizer, stats.lr, Master(), grads, segments_, state_);
    scratch_.Give(std::move(owned_grads));
    DSLAUNCH_RETURN_IF_ERROR(PublishParameters());
    ++applied_;
    return stats;
  }

  Status GatherParameters(std::span<float> out) override {
    DSLAUNCH_CHECK(out.size() == numel_);
    std::span<float> master = Master();
    std::copy(master.begin(), master.end(), out.begin() + shard_.begin);
    if (stage_ == 0) return Status::Ok();
    return comm_.AllGather(std::span<const float>(out.data() + shard_.begin, shard_.size()), out,
                           ShardCounts(numel_, comm_.world_size()))
        .WithContext("parameter gather");
  }

  EngineSnapshot Snapshot() const override {
    EngineSnapshot snap;
    snap.range = ShardFor(numel_, comm_.world_size(), comm_.rank());
    // Offset of the saved slice inside the held state: 0 at stages 1-3 (the shard is the slice).
    const size_t at = snap.range.begin - shard_.begin;
    const std::vector<std::string> names = StateTensorNames(options_.optimizer);
    const std::vector<const std::vector<float>*> buffers = {nullptr, &state_.m, &state_.v};
    for (size_t i = 0; i < names.size(); ++i) {
      const float* base = i == 0 ? Master().data() : buffers[i]->data();
      snap.tensors.emplace_back(names[i], std::span<const float>(base + at, snap.range.size()));
    }
    snap.optimizer_step = state_.step;
    snap.applied_steps = applied_;
    snap.loss_scaler = scaler_.state();
    return snap;
  }

  Status Restore(const StateReader& read, int64_t optimizer_step, int64_t applied_steps,
                 const LossScaler::State& loss_scaler) override {
    const std::vector<std::string> names = StateTensorNames(options_.optimizer);
    std::vector<float*> targets = {Master().data(), state_.m.data(), state_.v.data()};
    for (size_t i = 0; i < names.size(); ++i) {
      DSLAUNCH_RETURN_IF_ERROR(read(names[i], shard_.begin, shard_.end, targets[i]));
    }
    state_.step = optimizer_step;
    applied_ = applied_steps;
    if (options_.precision == Precision::kFp16) scaler_.Restore(loss_scaler);
    DropPrefetched();
    return PublishParameters();
  }

  MemoryStats memory() const override {
    MemoryStats m;
    m.parameters = params_.size() * sizeof(S);
    for (const auto& g : groups_) m.parameters += g.persistent.size() * sizeof(S);
    m.gradients = grads_.size() * sizeof(S);
    m.optimizer_state = state_.bytes() + master_.size() * sizeof(float);
    m.working = scratch_.peak() + bucket_.capacity() * sizeof(float) + staging_.capacity() * sizeof(S);
    return m;
  }

 private:
  struct GroupState {
    std::vector<S> persistent;  // stage 3: the whole group, kept on every rank
    std::vector<float> live;    // fp32 copy handed out by Acquire
    int refs = 0;               // Acquires not yet Released
    bool fetched = false;       // `live` holds the current values
    std::vector<float> grad;    // the micro-step's fp32 gradient, until GradientReady
    bool grad_active = false;
  };

  const ParameterGroup& Group(int g) const { return layout_.groups()[static_cast<size_t>(g)]; }

  // The fp32 master weights this rank updates: with fp32 storage its shard of the parameters
  // themselves (all of them at stage 3 are the shard), else the separate fp32 copy.
  template <class Self>
  static auto MasterOf(Self& self) {
    if constexpr (kFp32) {
      return std::span(self.params_.data() + (self.stage_ == 3 ? 0 : self.shard_.begin), self.shard_.size());
    } else {
      return std::span(self.master_.data(), self.master_.size());
    }
  }
  std::span<float> Master() { return MasterOf(*this); }
  std::span<const float> Master() const { return MasterOf(*this); }

  // Elements of [lo, hi) in each rank's shard: the counts of a collective over that range.
  std::vector<size_t> RangeCounts(size_t lo, size_t hi) const {
    std::vector<size_t> counts;
    for (const ShardRange& s : shards_) {
      const size_t b = std::max(lo, s.begin), e = std::min(hi, s.end);
      counts.push_back(e > b ? e - b : 0);
    }
    return counts;
  }
  // This rank's part of [lo, hi), as a range of flat indices.
  ShardRange OwnPart(size_t lo, size_t hi) const {
    const size_t b = std::max(lo, shard_.begin), e = std::min(hi, shard_.end);
    return e > b ? ShardRange{b, e} : ShardRange{b, b};
  }

  void Defer(Status status) {
    if (deferred_.ok() && !status.ok()) deferred_ = std::move(status);
  }

  // ---- ParameterAccess ----

  std::span<const float> Acquire(int g) override {
    const ParameterGroup& group = Group(g);
    GroupState& st = groups_[static_cast<size_t>(g)];
    if constexpr (kFp32) {
      if (stage_ < 3) return {params_.data() + group.offset, group.numel};
      if (!st.persistent.empty()) return st.persistent;
    }
    if (!st.fetched) Fetch(g);
    ++st.refs;
    last_acquired_ = g;
    return st.live;
  }

  void Release(int g) override {
    GroupState& st = groups_[static_cast<size_t>(g)];
    if (st.refs == 0) return;  // resident fp32: nothing was handed out
    if (--st.refs == 0) FreeLive(st);
  }

  std::span<float> Gradient(int g) override {
    const ParameterGroup& group = Group(g);
    if constexpr (kFp32) {
      if (stage_ < 2) return {grads_.data() + group.offset, group.numel};
    }
    GroupState& st = groups_[static_cast<size_t>(g)];
    if (!st.grad_active) {
      st.grad = scratch_.Take(group.numel);  // zeroed
      st.grad_active = true;
    }
    return st.grad;
  }

  void GradientReady(int g) override {
    const ParameterGroup& group = Group(g);
    GroupState& st = groups_[static_cast<size_t>(g)];
    if (st.grad_active) {
      if (stage_ < 2) {
        AddInto<S>(st.grad, std::span<S>(grads_.data() + group.offset, group.numel));
      } else {
        AppendToBucket(group, st.grad);
      }
      scratch_.Give(std::move(st.grad));
      st.grad_active = false;
    }
    if (stage_ >= 2 && ++ready_count_ == static_cast<int>(groups_.size())) {
      FlushBucket();  // the last group of this micro-step's backward
      ready_count_ = 0;
    }
  }

  // ---- Parameters: fetching groups (16-bit storage, stage 3) ----

  void FreeLive(GroupState& st) {
    live_elements_ -= st.live.size();
    scratch_.Give(std::move(st.live));
    st.fetched = false;
  }

  // Groups fetched ahead and never acquired, and every fp32 copy, are stale once the step changes
  // the parameters.
  void DropPrefetched() {
    for (GroupState& st : groups_) {
      if (st.fetched && st.refs == 0) FreeLive(st);
      DSLAUNCH_CHECK(st.refs == 0) << "a group was acquired and not released before Step";
    }
  }

  void Fetch(int g) {
    const ParameterGroup& group = Group(g);
    GroupState& st = groups_[static_cast<size_t>(g)];
    if (stage_ < 3 || !st.persistent.empty()) {
      st.live = scratch_.Take(group.numel);
      live_elements_ += group.numel;
      const S* from = stage_ < 3 ? params_.data() + group.offset : st.persistent.data();
      ToFloat(std::span<const S>(from, group.numel), std::span<float>(st.live));
      st.fetched = true;
      return;
    }
    // Stage 3: gather g and the next groups in the direction of travel in one collective.
    const int count = static_cast<int>(groups_.size());
    const int dir = g >= last_acquired_ ? 1 : -1;
    int first = g, last = g;
    size_t total = group.numel;
    const size_t prefetch = static_cast<size_t>(std::max<int64_t>(0, options_.zero.stage3_prefetch_bucket_size));
    const size_t max_live = static_cast<size_t>(std::max<int64_t>(0, options_.zero.stage3_max_live_parameters));
    for (int h = g + dir; h >= 0 && h < count; h += dir) {
      const GroupState& next = groups_[static_cast<size_t>(h)];
      const size_t n = Group(h).numel;
      if (!next.persistent.empty() || next.fetched || total + n > prefetch || live_elements_ + total + n > max_live) break;
      total += n;
      (dir > 0 ? last : first) = h;
    }
    const size_t lo = Group(first).offset, hi = Group(last).offset + Group(last).numel;
    const ShardRange own = OwnPart(lo, hi);
    if constexpr (kFp32) {
      std::vector<float> gathered = scratch_.Take(hi - lo);
      Defer(comm_.AllGather(ConstView<S>(params_.data() + (own.begin - shard_.begin), own.size()),
                            MutableView<S>(gathered.data(), gathered.size()), RangeCounts(lo, hi))
                .WithContext("parameter all-gather of groups " + Group(first).name + ".." + Group(last).name));
      for (int h = first; h <= last; ++h) {
        GroupState& hs = groups_[static_cast<size_t>(h)];
        hs.live = scratch_.Take(Group(h).numel);
        std::copy_n(gathered.begin() + static_cast<std::ptrdiff_t>(Group(h).offset - lo), Group(h).numel, hs.live.begin());
        hs.fetched = true;
        live_elements_ += Group(h).numel;
      }
      scratch_.Give(std::move(gathered));
    } else {
      if (staging_.size() < hi - lo) staging_.resize(hi - lo);
      Defer(comm_.AllGather(ConstView<S>(params_.data() + (own.begin - shard_.begin), own.size()),
                            MutableView<S>(staging_.data(), hi - lo), RangeCounts(lo, hi))
                .WithContext("parameter all-gather of groups " + Group(first).name + ".." + Group(last).name));
      for (int h = first; h <= last; ++h) {
        GroupState& hs = groups_[static_cast<size_t>(h)];
        hs.live = scratch_.Take(Group(h).numel);
        ToFloat(std::span<const S>(staging_.data() + (Group(h).offset - lo), Group(h).numel), std::span<float>(hs.live));
        hs.fetched = true;
        live_elements_ += Group(h).numel;
      }
    }
  }

  // ---- Gradients: buckets (stages 2-3) ----

  // Groups arrive from the backward pass in descending flat order; a bucket holds a contiguous
  // run [bucket_lo_, bucket_hi_) laid out at the end of bucket_, so the run grows downwards.
  void AppendToBucket(const ParameterGroup& group, std::span<const float> grad) {
    const size_t lo = group.offset, hi = group.offset + group.numel;
    const bool empty = bucket_hi_ == bucket_lo_;
    if (!empty && (hi != bucket_lo_ || bucket_hi_ - lo > bucket_capacity_)) FlushBucket();
    if (bucket_hi_ == bucket_lo_) {
      if (bucket_.size() < bucket_capacity_) bucket_.resize(bucket_capacity_);
      bucket_hi_ = hi;
    }
    bucket_lo_ = lo;
    std::copy(grad.begin(), grad.end(), bucket_.begin() + static_cast<std::ptrdiff_t>(bucket_capacity_ - (bucket_hi_ - lo)));
  }

  // Reduce-scatters the bucket (average over ranks) and adds this rank's part to its gradient
  // partition.
  void FlushBucket() {
    const size_t lo = bucket_lo_, hi = bucket_hi_;
    bucket_lo_ = bucket_hi_ = 0;
    if (hi == lo) return;
    const ShardRange own = OwnPart(lo, hi);
    std::vector<float> reduced = scratch_.Take(own.size());
    Defer(comm_.ReduceScatter(std::span<const float>(bucket_.data() + (bucket_capacity_ - (hi - lo)), hi - lo),
                              std::span<float>(reduced), RangeCounts(lo, hi), ReduceOp::kAvg)
              .WithContext("gradient reduce-scatter"));
    AddInto<S>(reduced, std::span<S>(grads_.data() + (own.begin - shard_.begin), own.size()));
    scratch_.Give(std::move(reduced));
  }

  // ---- The step ----

  // Leaves in `grads` the fp32 gradient of this rank's shard averaged over ranks (scaled by the
  // loss scale), in `buffer` when it needs one.
  Status ReduceForStep(std::vector<float>& buffer, std::span<float>& grads) {
    if (stage_ >= 2) {  // already reduced, into the partition
      if constexpr (kFp32) {
        grads = grads_;
      } else {
        buffer = scratch_.Take(grads_.size());
        ToFloat(std::span<const S>(grads_), std::span<float>(buffer));
        grads = buffer;
      }
      return Status::Ok();
    }
    // Stages 0-1: the whole gradient, in chunks of reduce_bucket_size.
    bool in_place = false;  // fp32 at stage 0: all-reduce the gradient where it is
    if constexpr (kFp32) {
      if (stage_ == 0) {
        grads = grads_;
        in_place = true;
      }
    }
    if (!in_place) {
      buffer = scratch_.Take(shard_.size());
      grads = buffer;
    }
    std::vector<float> staging;  // 16-bit storage at stage 1: one chunk converted to fp32
    if (!kFp32 && stage_ == 1) staging = scratch_.Take(std::min(numel_, bucket_capacity_));
    for (size_t lo = 0; lo < numel_; lo += bucket_capacity_) {
      const size_t hi = std::min(numel_, lo + bucket_capacity_);
      if (stage_ == 0) {
        std::span<float> chunk = grads.subspan(lo, hi - lo);
        if constexpr (!kFp32) ToFloat(std::span<const S>(grads_.data() + lo, hi - lo), chunk);
        DSLAUNCH_RETURN_IF_ERROR(comm_.AllReduce(chunk, ReduceOp::kAvg).WithContext("gradient all-reduce"));
        continue;
      }
      std::span<const float> input;
      if constexpr (kFp32) {
        input = std::span<const float>(grads_.data() + lo, hi - lo);
      } else {
        std::span<float> chunk(staging.data(), hi - lo);
        ToFloat(std::span<const S>(grads_.data() + lo, hi - lo), chunk);
        input = chunk;
      }
      const ShardRange own = OwnPart(lo, hi);
      DSLAUNCH_RETURN_IF_ERROR(comm_.ReduceScatter(input, grads.subspan(own.begin - shard_.begin, own.size()),
                                                   RangeCounts(lo, hi), ReduceOp::kAvg)
                                   .WithContext("gradient reduce-scatter"));
    }
    scratch_.Give(std::move(staging));
    return Status::Ok();
  }

  // After the update: the storage-type parameters every rank needs, from the master weights.
  Status PublishParameters() {
    if constexpr (!kFp32) {
      S* owned = params_.data() + (stage_ == 3 ? 0 : shard_.begin);
      FromFloat(std::span<const float>(master_), std::span<S>(owned, shard_.size()));
    }
    if (stage_ == 1 || stage_ == 2) {
      const size_t chunk = static_cast<size_t>(std::max<int64_t>(1, options_.zero.allgather_bucket_size));
      for (size_t lo = 0; lo < numel_; lo += chunk) {
        const size_t hi = std::min(numel_, lo + chunk);
        const ShardRange own = OwnPart(lo, hi);
        DSLAUNCH_RETURN_IF_ERROR(comm_.AllGather(ConstView<S>(params_.data() + own.begin, own.size()),
                                                 MutableView<S>(params_.data() + lo, hi - lo), RangeCounts(lo, hi))
                                     .WithContext("parameter all-gather"));
      }
    }
    if (stage_ == 3) {  // the persistent groups stay whole on every rank
      for (size_t g = 0; g < groups_.size(); ++g) {
        std::vector<S>& whole = groups_[g].persistent;
        if (whole.empty()) continue;
        const size_t lo = layout_.groups()[g].offset, hi = lo + whole.size();
        const ShardRange own = OwnPart(lo, hi);
        DSLAUNCH_RETURN_IF_ERROR(comm_.AllGather(ConstView<S>(params_.data() + (own.begin - shard_.begin), own.size()),
                                                 MutableView<S>(whole.data(), whole.size()), RangeCounts(lo, hi))
                                     .WithContext("persistent parameter all-gather of " + layout_.groups()[g].name));
      }
    }
    return Status::Ok();
  }

  const ParameterLayout& layout_;
  Communicator& comm_;
  EngineOptions options_;
  const int stage_;
  const size_t numel_;
  const ShardRange shard_;           // the master weights this rank updates (all at stage 0)
  std::vector<ShardRange> shards_;   // every rank's
  std::vector<S> params_;            // whole (stages 0-2) or shard_ (stage 3)
  std::vector<float> master_;        // shard_, 16-bit storage only (fp32 updates params_ in place)
  std::vector<S> grads_;             // whole (stages 0-1) or shard_ (stages 2-3)
  OptimizerState state_;
  LossScaler scaler_;
  std::vector<GroupState> groups_;
  std::vector<DecaySegment> segments_;  // relative to shard_
  ScratchBuffers scratch_;
  std::vector<float> bucket_;
  size_t bucket_capacity_ = 0;
  size_t bucket_lo_ = 0, bucket_hi_ = 0;
  std::vector<S> staging_;           // stage 3, 16-bit: gathered groups before conversion
  size_t live_elements_ = 0;
  int last_acquired_ = -1;
  int ready_count_ = 0;
  Status deferred_;
  int64_t applied_ = 0;
};

template <class S>
std::unique_ptr<Engine> MakeEngine(const ParameterLayout& layout, Communicator& comm, const EngineOptions& options,
                                   std::span<const float> initial) {
  return std::make_unique<ZeroEngine<S>>(layout, comm, options, initial);
}

}  // namespace

std::vector<std::string> StateTensorNames(const OptimizerParams& optimizer) {
  if (optimizer.kind == OptimizerKind::kSgd) {
    if (optimizer.momentum != 0.0) return {"master", "momentum_buffer"};
    return {"master"};
  }
  return {"master", "exp_avg", "exp_avg_sq"};
}

EngineOptions EngineOptionsFrom(const TrainConfig& config) {
  EngineOptions o;
  o.zero = config.zero;
  o.precision = config.precision;
  o.loss_scaler = config.loss_scaler;
  o.optimizer = config.optimizer;
  o.schedule = config.lr_schedule;
  o.gradient_clipping = config.gradient_clipping;
  return o;
}

Result<std::unique_ptr<Engine>> Engine::Create(const ParameterLayout& layout, Communicator& comm,
                                               const EngineOptions& options, std::span<const float> initial) {
  if (options.zero.stage < 0 || options.zero.stage > 3) {
    return InvalidArgumentError("zero_optimization.stage " + std::to_string(options.zero.stage) +
                                " does not exist; use 0, 1, 2 or 3");
  }
  if (options.precision == Precision::kFp16) DSLAUNCH_RETURN_IF_ERROR(ValidateLossScalerConfig(options.loss_scaler));
  if (initial.size() != layout.numel()) {
    return InvalidArgumentError("initial parameters: " + std::to_string(initial.size()) + " values for a model of " +
                                std::to_string(layout.numel()));
  }
  switch (options.precision) {
    case Precision::kFp32: return MakeEngine<float>(layout, comm, options, initial);
    case Precision::kFp16: return MakeEngine<Half>(layout, comm, options, initial);
    case Precision::kBf16: return MakeEngine<BFloat16>(layout, comm, options, initial);
  }
  return InternalError("unknown precision");
}

}  // namespace dslaunch::runtime
