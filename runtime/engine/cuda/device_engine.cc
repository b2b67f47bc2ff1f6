// DeviceZeroEngine: the one implementation of DeviceEngine (device_engine.h), ZeroEngine's stages
// and arithmetic (runtime/engine/zero_engine.cc) with the state in device memory.
#include "runtime/engine/cuda/device_engine.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "common/check.h"
#include "runtime/core/sixteen_bit_float.h"
#include "runtime/engine/cuda/device_buffer.h"
#include "runtime/engine/shard_map.h"
#include "runtime/engine/step_rules.h"
#include "runtime/engine/storage_type.h"
#include "runtime/ops/cuda/cuda_status.h"
#include "runtime/ops/cuda/ops.h"

namespace dslaunch::runtime {
namespace {

namespace cu = ops::cuda;

// The device type of storage S (Half and BFloat16 are the host's 16-bit types: the same bits).
template <class S>
using DeviceStorage = std::conditional_t<std::is_same_v<S, Half>, __half,
                                         std::conditional_t<std::is_same_v<S, BFloat16>, __nv_bfloat16, float>>;

// Host elements staged per copy when the initial values or a checkpoint's tensors cross to the device.
constexpr size_t kStagingElements = size_t{1} << 20;

Status Cuda(cudaError_t rc, std::string_view what) { return cu::CudaStatus(rc, "DeviceEngine", what); }

// Elements of each buffer the engine allocates for storage S (Initialise allocates exactly these;
// DeviceEngine::PlanBytes counts them before anything is allocated).
struct BufferSizes {
  size_t parameters = 0;    // S: whole (stages 0-2) or the owned slice (stage 3)
  size_t working_copy = 0;  // fp32: stages 0-2 with 16-bit storage
  size_t master = 0;        // fp32: 16-bit storage, the owned slice
  size_t moment = 0;        // fp32, each of Adam's two: the owned slice
  size_t gradients = 0;     // S: whole (stages 0-1) or the owned slice (stages 2-3)
  size_t micro = 0;         // fp32 micro-step gradient, whole, unless the model writes the gradients
  size_t reduced = 0;       // fp32: stages 1-3, the owned slice
  size_t gather = 0;        // stage 3: the one group GptCuda holds at a time, fp32 (and S for 16-bit)
};

template <class S>
BufferSizes SizesFor(const ParameterLayout& layout, const EngineOptions& options, int world, int rank) {
  const ZeroPartitioning parts = PartitioningFor(options.zero.stage);
  const ShardMap shards(layout.numel(), world, rank, parts.optimizer_state);
  const size_t numel = shards.numel(), own = shards.own().size();
  size_t largest = 0;
  for (const auto& g : layout.groups()) largest = std::max(largest, g.numel);
  BufferSizes n;
  n.parameters = parts.parameters ? own : numel;
  n.working_copy = !kIsFp32Storage<S> && !parts.parameters ? numel : 0;
  n.master = kIsFp32Storage<S> ? 0 : own;
  n.moment = own;
  n.gradients = parts.gradients ? own : numel;
  n.micro = kIsFp32Storage<S> && !parts.gradients ? 0 : numel;
  n.reduced = shards.partitioned() ? own : 0;
  n.gather = parts.parameters ? largest : 0;
  return n;
}

template <class S>
MemoryStats BytesOf(const BufferSizes& n) {
  MemoryStats m;
  m.parameters = n.parameters * sizeof(S) + n.working_copy * sizeof(float);
  m.gradients = n.gradients * sizeof(S);
  m.optimizer_state = (n.master + 2 * n.moment) * sizeof(float);
  m.working = (n.micro + n.reduced) * sizeof(float) + n.gather * (sizeof(float) + (kIsFp32Storage<S> ? 0 : sizeof(S)));
  return m;
}

template <class S>
class DeviceZeroEngine final : public DeviceEngine, private DeviceParameterAccess<float> {
 public:
  using D = DeviceStorage<S>;

  DeviceZeroEngine(const ParameterLayout& layout, DeviceCollectives& comm, const EngineOptions& options,
                   cudaStream_t compute)
      : layout_(layout),
        dc_(comm),
        comm_(comm.communicator()),
        options_(options),
        partitioning_(PartitioningFor(options.zero.stage)),
        shards_(layout.numel(), comm_.world_size(), comm_.rank(), partitioning_.optimizer_state),
        compute_(compute),
        scaler_(options.precision == Precision::kFp16 ? options.loss_scaler : LossScalerConfig{}),
        segments_(OwnedSegments(layout, shards_.own())),
        groups_(layout.groups().size()) {}

  // Allocates the buffers and fills parameters and master weights from `initial`.
  Status Initialise(const InitialValues& initial) {
    const BufferSizes n = SizesFor<S>(layout_, options_, comm_.world_size(), comm_.rank());
    const size_t own = shards_.own().size();
    gather_elements_ = n.gather;
    DSLAUNCH_ASSIGN_OR_RETURN(params_, DeviceBuffer<D>::Allocate(n.parameters, "parameters"));
    DSLAUNCH_ASSIGN_OR_RETURN(master_, DeviceBuffer<float>::Allocate(n.master, "fp32 master weights"));
    DSLAUNCH_ASSIGN_OR_RETURN(work_, DeviceBuffer<float>::Allocate(n.working_copy, "fp32 copy of the parameters"));
    DSLAUNCH_ASSIGN_OR_RETURN(m_, DeviceBuffer<float>::Allocate(n.moment, "exp_avg"));
    DSLAUNCH_ASSIGN_OR_RETURN(v_, DeviceBuffer<float>::Allocate(n.moment, "exp_avg_sq"));
    DSLAUNCH_ASSIGN_OR_RETURN(grads_, DeviceBuffer<D>::Allocate(n.gradients, "gradients"));
    DSLAUNCH_ASSIGN_OR_RETURN(micro_, DeviceBuffer<float>::Allocate(n.micro, "fp32 micro-step gradients"));
    DSLAUNCH_ASSIGN_OR_RETURN(reduced_, DeviceBuffer<float>::Allocate(n.reduced, "reduced gradients"));
    DSLAUNCH_ASSIGN_OR_RETURN(sum_, DeviceBuffer<double>::Allocate(1, "gradient norm"));
    DSLAUNCH_ASSIGN_OR_RETURN(partial_, DeviceBuffer<float>::Allocate(1, "gradient norm partial"));
    DSLAUNCH_RETURN_IF_ERROR(Cuda(cudaMemsetAsync(m_.data(), 0, m_.bytes(), compute_), "zero exp_avg"));
    DSLAUNCH_RETURN_IF_ERROR(Cuda(cudaMemsetAsync(v_.data(), 0, v_.bytes(), compute_), "zero exp_avg_sq"));

    // The parameters rounded to S on the host, as ParameterStore rounds them; the master weights
    // (16-bit storage) the owned values themselves.
    const size_t first = partitioning_.parameters ? shards_.own().begin : 0;
    DSLAUNCH_RETURN_IF_ERROR(CopyIn(first, n.parameters, initial, [&](size_t at, std::span<const float> values) -> Status {
      std::vector<S> rounded(values.size());
      FromFloat(values, std::span<S>(rounded));
      return ToDevice(params_.data() + at, rounded.data(), rounded.size() * sizeof(S));
    }));
    if (!kIsFp32Storage<S>) {
      DSLAUNCH_RETURN_IF_ERROR(CopyIn(shards_.own().begin, own, initial, [&](size_t at, std::span<const float> values) {
        return ToDevice(master_.data() + at, values.data(), values.size() * sizeof(float));
      }));
    }
    return RefreshWorkingCopy();
  }

  // ---- Engine ----

  ParameterAccess& access() override {
    DSLAUNCH_CHECK(false) << "the device engine's parameters are in device memory: use device_access()";
    __builtin_unreachable();
  }
  DeviceParameterAccess<float>& device_access() override { return *this; }
  void SetModelParallelGroups(std::vector<Communicator*> groups, std::vector<ShardRange>) override {
    for (Communicator* g : groups) model_parallel_ |= g->world_size() > 1;
  }
  double loss_scale() const override { return options_.precision == Precision::kFp16 ? scaler_.scale() : 1.0; }
  Status status() const override { return deferred_; }
  int64_t applied_steps() const override { return applied_; }
  std::vector<std::string> notes() const override { return {}; }
  swap::IoStats swap_io() const override { return {}; }

  void BeginStep(int micro_steps) override {
    DSLAUNCH_CHECK(micro_steps >= 1) << "a step needs at least one micro-step, got " << micro_steps;
    Record(Cuda(cudaMemsetAsync(grads_.data(), 0, grads_.bytes(), compute_), "zero the gradients"));
    for (GroupState& g : groups_) g.active = false;
    ready_count_ = 0;
    micro_steps_left_ = micro_steps;
  }

  Result<StepStats> Step() override {
    Record(dc_.Synchronize("gradient reduction"));
    DSLAUNCH_RETURN_IF_ERROR(deferred_);
    DSLAUNCH_CHECK(micro_steps_left_ == 0 && ready_count_ == 0)
        << "the step ran a different number of micro-steps than BeginStep announced, or one reported only "
        << ready_count_ << " of " << groups_.size() << " groups ready (" << micro_steps_left_ << " micro-steps left)";
    for (const GroupState& g : groups_) DSLAUNCH_CHECK(g.refs == 0) << "a group was acquired and never released";
    if (model_parallel_) {
      return FailedPreconditionError("the device engine does not train a model split over pipeline or tensor ranks yet");
    }
    StepStats stats;
    stats.loss_scale = loss_scale();
    DSLAUNCH_ASSIGN_OR_RETURN(float* gradient, StepGradient());
    DSLAUNCH_ASSIGN_OR_RETURN(const double sum, GlobalSumOfSquares(gradient));
    stats.grad_norm = std::sqrt(sum) / stats.loss_scale;
    stats.lr = LearningRateForAppliedSteps(options_.schedule, options_.optimizer.lr, applied_);
    DSLAUNCH_ASSIGN_OR_RETURN(const bool skip, DecideOnOverflow(options_.precision, scaler_, stats));
    if (skip) return stats;
    DSLAUNCH_RETURN_IF_ERROR(Update(stats.lr, UnscaleCoefficient(options_.gradient_clipping, stats), gradient));
    DSLAUNCH_RETURN_IF_ERROR(Publish());
    ++applied_;
    return stats;
  }

  Status GatherParameters(std::span<float> out) override {
    DSLAUNCH_CHECK(out.size() == shards_.numel());
    const ShardRange& own = shards_.own();
    if (!shards_.partitioned()) return ToHost(out.data(), Master(), out.size() * sizeof(float));
    DSLAUNCH_ASSIGN_OR_RETURN(DeviceBuffer<float> whole, DeviceBuffer<float>::Allocate(out.size(), "parameter gather"));
    DSLAUNCH_RETURN_IF_ERROR(Cuda(cudaMemcpyAsync(whole.data() + own.begin, Master(), own.size() * sizeof(float),
                                                  cudaMemcpyDeviceToDevice, compute_),
                                  "copy the master weights"));
    DSLAUNCH_RETURN_IF_ERROR(dc_.OrderAfter(compute_));
    DSLAUNCH_RETURN_IF_ERROR(
        dc_.EnqueueAllGather(View(std::span<const float>(whole.data() + own.begin, own.size())),
                             View(std::span<float>(whole.data(), whole.size())),
                             ShardCounts(shards_.numel(), comm_.world_size())));
    DSLAUNCH_RETURN_IF_ERROR(dc_.Synchronize("parameter gather").WithContext("parameter gather"));
    return ToHost(out.data(), whole.data(), whole.bytes());
  }

  MemoryStats memory() const override {
    MemoryStats m;
    m.parameters = params_.bytes() + work_.bytes();
    m.gradients = grads_.bytes();
    m.optimizer_state = master_.bytes() + m_.bytes() + v_.bytes();
    m.working = micro_.bytes() + reduced_.bytes() + pool_bytes_;
    return m;
  }
  size_t device_bytes() const override {
    const MemoryStats m = memory();
    return m.parameters + m.gradients + m.optimizer_state + m.working + sum_.bytes() + partial_.bytes();
  }

  // The owned state streamed through host memory (EngineSnapshot::stream): nothing of it is
  // resident on the host.
  EngineSnapshot Snapshot() const override {
    EngineSnapshot snap;
    snap.range = ShardFor(shards_.numel(), comm_.world_size(), comm_.rank());
    const size_t at = snap.range.begin - shards_.own().begin;
    for (const std::string& name : StateTensorNames(options_.optimizer)) snap.tensors.emplace_back(name, std::span<const float>());
    const float* tensors[] = {Master(), m_.data(), v_.data()};
    const size_t count = snap.range.size();
    cudaStream_t stream = compute_;
    snap.stream = [tensors, at, count, stream](size_t index, const EngineSnapshot::Sink& sink) -> Status {
      std::vector<float> staging(std::min(count, kStagingElements));
      for (size_t done = 0; done < count; done += staging.size()) {
        const size_t n = std::min(staging.size(), count - done);
        DSLAUNCH_RETURN_IF_ERROR(Cuda(cudaMemcpyAsync(staging.data(), tensors[index] + at + done, n * sizeof(float),
                                                      cudaMemcpyDeviceToHost, stream),
                                      "copy the state to the host"));
        DSLAUNCH_RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(stream), "copy the state to the host"));
        DSLAUNCH_RETURN_IF_ERROR(sink(std::span<const float>(staging.data(), n)));
      }
      return Status::Ok();
    };
    snap.optimizer_step = optimizer_step_;
    snap.applied_steps = applied_;
    snap.loss_scaler = scaler_.state();
    return snap;
  }

  Status Restore(const StateReader& read, int64_t optimizer_step, int64_t applied_steps,
                 const LossScaler::State& loss_scaler) override {
    const std::vector<std::string> names = StateTensorNames(options_.optimizer);
    float* tensors[] = {Master(), m_.data(), v_.data()};
    const ShardRange& own = shards_.own();
    std::vector<float> staging(std::min(own.size(), kStagingElements));
    for (size_t i = 0; i < names.size(); ++i) {
      for (size_t done = 0; done < own.size(); done += staging.size()) {
        const size_t n = std::min(staging.size(), own.size() - done);
        DSLAUNCH_RETURN_IF_ERROR(read(names[i], own.begin + done, own.begin + done + n, staging.data()));
        DSLAUNCH_RETURN_IF_ERROR(ToDevice(tensors[i] + done, staging.data(), n * sizeof(float)));
      }
    }
    optimizer_step_ = optimizer_step;
    applied_ = applied_steps;
    if (options_.precision == Precision::kFp16) scaler_.Restore(loss_scaler);
    if (!kIsFp32Storage<S>) {
      DSLAUNCH_RETURN_IF_ERROR(cu::FloatTo16(OwnedParameters(), kStorageDType<S>, Master(),
                                             static_cast<long>(own.size()), compute_));
    }
    return Publish();
  }

 private:
  struct GroupState {
    bool active = false;  // its gradient was handed out in this micro-step
    int refs = 0;         // stage 3: Acquires not yet Released
    DeviceBuffer<float> values;   // stage 3: the gathered group in fp32
    DeviceBuffer<D> gathered;     // stage 3, 16-bit: the gathered group before conversion
  };

  const ParameterGroup& Info(int g) const { return layout_.groups()[static_cast<size_t>(g)]; }
  void Record(const Status& s) {
    if (deferred_.ok() && !s.ok()) deferred_ = s;
  }

  // The owned parameters in S, and the fp32 master weights (the owned parameters themselves for
  // fp32 storage).
  D* OwnedParameters() const { return params_.data() + (partitioning_.parameters ? 0 : shards_.own().begin); }
  float* Master() const {
    if constexpr (kIsFp32Storage<S>) {
      return OwnedParameters();
    } else {
      return master_.data();
    }
  }

  Status ToDevice(void* to, const void* from, size_t bytes) {
    DSLAUNCH_RETURN_IF_ERROR(Cuda(cudaMemcpyAsync(to, from, bytes, cudaMemcpyHostToDevice, compute_), "copy to the device"));
    return Cuda(cudaStreamSynchronize(compute_), "copy to the device");
  }
  Status ToHost(void* to, const void* from, size_t bytes) {
    DSLAUNCH_RETURN_IF_ERROR(Cuda(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToHost, compute_), "copy to the host"));
    return Cuda(cudaStreamSynchronize(compute_), "copy to the host");
  }
  // `count` values of `initial` from flat index `first`, a staging buffer at a time, to `put(at, values)`.
  template <class Put>
  Status CopyIn(size_t first, size_t count, const InitialValues& initial, const Put& put) {
    std::vector<float> staging(std::min(count, kStagingElements));
    for (size_t done = 0; done < count; done += staging.size()) {
      const size_t n = std::min(staging.size(), count - done);
      initial(first + done, std::span<float>(staging.data(), n));
      DSLAUNCH_RETURN_IF_ERROR(put(done, std::span<const float>(staging.data(), n)));
    }
    return Status::Ok();
  }

  // Stages 0-2 with 16-bit storage: the model's fp32 copy of the parameters, from params_.
  Status RefreshWorkingCopy() {
    if (work_.size() == 0) return Status::Ok();
    return cu::Float16To32(work_.data(), params_.data(), kStorageDType<S>, static_cast<long>(work_.size()), compute_);
  }

  // ---- DeviceParameterAccess: parameters from the store, gradients to the reduction ----

  Result<const float*> Acquire(int g) override {
    const ParameterGroup& group = Info(g);
    if (!partitioning_.parameters) {
      if constexpr (kIsFp32Storage<S>) {
        return static_cast<const float*>(params_.data() + group.offset);
      } else {
        return static_cast<const float*>(work_.data() + group.offset);
      }
    }
    GroupState& st = groups_[static_cast<size_t>(g)];
    if (st.refs++ > 0) return static_cast<const float*>(st.values.data());
    Status s = Gather(g, st);
    if (!s.ok()) {
      --st.refs;
      Record(s);
      return s;
    }
    return static_cast<const float*>(st.values.data());
  }

  void Release(int g) override {
    if (!partitioning_.parameters) return;
    GroupState& st = groups_[static_cast<size_t>(g)];
    DSLAUNCH_CHECK(st.refs > 0) << "Release of group " << g << " without Acquire";
    if (--st.refs > 0) return;
    pool_values_.push_back(std::move(st.values));
    if (!kIsFp32Storage<S>) pool_gathered_.push_back(std::move(st.gathered));
  }

  // Stage 3: the group's owned parts from every rank, into pooled buffers, ready on the compute
  // stream. The collective waits for the compute stream's earlier reads of a reused buffer.
  Status Gather(int g, GroupState& st) {
    const ParameterGroup& group = Info(g);
    const size_t lo = group.offset, hi = group.offset + group.numel;
    DSLAUNCH_ASSIGN_OR_RETURN(st.values, TakeFromPool(pool_values_, "gathered parameters"));
    const ShardRange part = shards_.OwnPart(lo, hi);
    const D* mine = params_.data() + (part.begin - shards_.own().begin);
    const ConstBufferView input{mine, part.size(), kStorageDType<S>};
    BufferView output{st.values.data(), hi - lo, kStorageDType<S>};
    if (!kIsFp32Storage<S>) {
      DSLAUNCH_ASSIGN_OR_RETURN(st.gathered, TakeFromPool(pool_gathered_, "gathered 16-bit parameters"));
      output.data = st.gathered.data();
    }
    DSLAUNCH_RETURN_IF_ERROR(dc_.OrderAfter(compute_));  // a reused buffer: after the compute stream's reads
    DSLAUNCH_RETURN_IF_ERROR(dc_.EnqueueAllGather(input, output, shards_.Counts(lo, hi)).WithContext("parameter gather"));
    DSLAUNCH_RETURN_IF_ERROR(dc_.OrderBefore(compute_));  // the model reads the group on the compute stream
    if (kIsFp32Storage<S>) return Status::Ok();
    return cu::Float16To32(st.values.data(), st.gathered.data(), kStorageDType<S>, static_cast<long>(hi - lo), compute_);
  }

  // A gather buffer (the largest group's size), reused or allocated.
  template <typename U>
  Result<DeviceBuffer<U>> TakeFromPool(std::vector<DeviceBuffer<U>>& pool, const char* what) {
    if (!pool.empty()) {
      DeviceBuffer<U> b = std::move(pool.back());
      pool.pop_back();
      return b;
    }
    DSLAUNCH_ASSIGN_OR_RETURN(DeviceBuffer<U> b, DeviceBuffer<U>::Allocate(gather_elements_, what));
    pool_bytes_ += b.bytes();
    return b;
  }

  Result<float*> Gradient(int g) override {
    const ParameterGroup& group = Info(g);
    if constexpr (kIsFp32Storage<S>) {
      if (!partitioning_.gradients) return reinterpret_cast<float*>(grads_.data()) + group.offset;
    }
    GroupState& st = groups_[static_cast<size_t>(g)];
    float* grad = micro_.data() + group.offset;
    if (!st.active) {
      // The previous micro-step's reductions read this buffer on the communication stream.
      if (order_before_zeroing_) {
        DSLAUNCH_RETURN_IF_ERROR(dc_.OrderBefore(compute_));
        order_before_zeroing_ = false;
      }
      Status s = Cuda(cudaMemsetAsync(grad, 0, group.numel * sizeof(float), compute_), "zero a micro-step gradient");
      if (!s.ok()) {
        Record(s);
        return s;
      }
      st.active = true;
    }
    return grad;
  }

  Status GradientReady(int g) override {
    Status s = Ready(g);
    Record(s);
    if (++ready_count_ == static_cast<int>(groups_.size())) {  // the last group of this micro-step
      ready_count_ = 0;
      --micro_steps_left_;
      order_before_zeroing_ = true;
    }
    return s;
  }

  // Whether this micro-step's backward reduces (stages 2-3: every one; stage 1: the last).
  bool ReducesNow() const { return partitioning_.gradients || (shards_.partitioned() && micro_steps_left_ == 1); }

  Status Ready(int g) {
    const ParameterGroup& group = Info(g);
    const size_t lo = group.offset, hi = group.offset + group.numel;
    GroupState& st = groups_[static_cast<size_t>(g)];
    const bool active = st.active;
    st.active = false;
    const ShardRange part = shards_.OwnPart(lo, hi);
    const size_t at = part.size() == 0 ? 0 : part.begin - shards_.own().begin;  // in the owned slice
    if (partitioning_.gradients) {
      // Stages 2-3: this micro-step's gradient reduce-scattered, this rank's part added to its slice.
      if (!active) return Status::Ok();
      DSLAUNCH_RETURN_IF_ERROR(dc_.OrderAfter(compute_));  // the backward wrote micro_
      DSLAUNCH_RETURN_IF_ERROR(dc_.EnqueueReduceScatter(View(std::span<const float>(micro_.data() + lo, hi - lo)),
                                                        View(std::span<float>(reduced_.data() + at, part.size())),
                                                        shards_.Counts(lo, hi), ReduceOp::kAvg)
                                   .WithContext("gradient reduce-scatter"));
      return cu::AddFloat(grads_.data() + at, reduced_.data() + at, static_cast<long>(part.size()), dc_.stream());
    }
    if (active) {  // 16-bit storage: the micro-step's gradient added with one rounding
      DSLAUNCH_RETURN_IF_ERROR(cu::AddFloat(grads_.data() + lo, micro_.data() + lo, static_cast<long>(hi - lo), compute_));
    }
    if (!ReducesNow()) return Status::Ok();
    // Stage 1, the last micro-step: the group's whole gradient is final; reduce-scatter it (fp32)
    // into the step's slice.
    const float* values = nullptr;
    if constexpr (kIsFp32Storage<S>) {
      values = grads_.data() + lo;
    } else {
      DSLAUNCH_RETURN_IF_ERROR(
          cu::Float16To32(micro_.data() + lo, grads_.data() + lo, kStorageDType<S>, static_cast<long>(hi - lo), compute_));
      values = micro_.data() + lo;
    }
    DSLAUNCH_RETURN_IF_ERROR(dc_.OrderAfter(compute_));  // the group's final gradient
    return dc_.EnqueueReduceScatter(View(std::span<const float>(values, hi - lo)),
                                    View(std::span<float>(reduced_.data() + at, part.size())), shards_.Counts(lo, hi),
                                    ReduceOp::kAvg)
        .WithContext("gradient reduce-scatter");
  }

  // ---- The step ----

  // The step's fp32 gradient of the owned slice, averaged over ranks (still times the loss scale).
  Result<float*> StepGradient() {
    const size_t numel = shards_.numel();
    if (!shards_.partitioned()) {  // stage 0: the whole gradient, all-reduced now
      float* values = nullptr;
      if constexpr (kIsFp32Storage<S>) {
        values = grads_.data();
      } else {
        DSLAUNCH_RETURN_IF_ERROR(
            cu::Float16To32(micro_.data(), grads_.data(), kStorageDType<S>, static_cast<long>(numel), compute_));
        values = micro_.data();
      }
      DSLAUNCH_RETURN_IF_ERROR(dc_.OrderAfter(compute_));
      DSLAUNCH_RETURN_IF_ERROR(
          dc_.EnqueueAllReduce(View(std::span<float>(values, numel)), ReduceOp::kAvg).WithContext("gradient all-reduce"));
      DSLAUNCH_RETURN_IF_ERROR(dc_.Synchronize("gradient all-reduce").WithContext("gradient all-reduce"));
      return values;
    }
    if (!partitioning_.gradients) return reduced_.data();  // stage 1: reduced in the last backward
    if constexpr (kIsFp32Storage<S>) {
      return grads_.data();
    } else {  // stages 2-3, 16-bit: converted (exactly) into the reduction's buffer
      DSLAUNCH_RETURN_IF_ERROR(cu::Float16To32(reduced_.data(), grads_.data(), kStorageDType<S>,
                                               static_cast<long>(grads_.size()), compute_));
      return reduced_.data();
    }
  }

  // The sum of squares of the whole averaged gradient: this rank's slice on the device, then (the
  // slice a partition) summed in fp32 across ranks, as ZeroEngine does.
  Result<double> GlobalSumOfSquares(const float* gradient) {
    const size_t own = shards_.own().size();
    DSLAUNCH_RETURN_IF_ERROR(cu::SumOfSquares(gradient, static_cast<long>(own), sum_.data(), compute_));
    double sum = 0;
    DSLAUNCH_RETURN_IF_ERROR(ToHost(&sum, sum_.data(), sizeof(double)));
    if (!shards_.partitioned()) return sum;
    const float partial = static_cast<float>(sum);
    DSLAUNCH_RETURN_IF_ERROR(ToDevice(partial_.data(), &partial, sizeof(float)));
    DSLAUNCH_RETURN_IF_ERROR(dc_.OrderAfter(compute_));
    DSLAUNCH_RETURN_IF_ERROR(dc_.EnqueueAllReduce(View(std::span<float>(partial_.data(), 1)), ReduceOp::kSum));
    DSLAUNCH_RETURN_IF_ERROR(dc_.Synchronize("gradient norm").WithContext("gradient norm"));
    float whole = 0;
    DSLAUNCH_RETURN_IF_ERROR(ToHost(&whole, partial_.data(), sizeof(float)));
    return static_cast<double>(whole);
  }

  // The fused Adam(W) update of the owned slice, segment by segment (weight decay or not), writing
  // the 16-bit parameters in the same pass.
  Status Update(double lr, double coef, const float* gradient) {
    const int64_t t = optimizer_step_ + 1;
    cu::AdamParams hyper;
    const OptimizerParams& o = options_.optimizer;
    hyper.decoupled = o.kind == OptimizerKind::kAdamW;
    hyper.lr = lr;
    hyper.beta1 = o.beta1;
    hyper.beta2 = o.beta2;
    hyper.eps = o.eps;
    hyper.weight_decay = o.weight_decay;
    hyper.bias_correction = o.bias_correction;
    hyper.step = t;
    hyper.grad_scale = static_cast<float>(coef);
    for (const DecaySegment& seg : segments_) {
      const long n = static_cast<long>(seg.end - seg.begin);
      if (n == 0) continue;
      void* copy = kIsFp32Storage<S> ? nullptr : static_cast<void*>(OwnedParameters() + seg.begin);
      DSLAUNCH_RETURN_IF_ERROR(cu::AdamUpdate(hyper, Master() + seg.begin, gradient + seg.begin, m_.data() + seg.begin,
                                              v_.data() + seg.begin, n, seg.decay, copy, kStorageDType<S>, compute_));
    }
    optimizer_step_ = t;
    return Status::Ok();
  }

  // The owners' updated parameters to every rank that holds them: all-gathered at stages 1-2,
  // then the fp32 working copy; stage 3 gathers at each Acquire.
  Status Publish() {
    if (shards_.partitioned() && !partitioning_.parameters) {
      const ShardRange& own = shards_.own();
      DSLAUNCH_RETURN_IF_ERROR(dc_.OrderAfter(compute_));
      DSLAUNCH_RETURN_IF_ERROR(dc_.EnqueueAllGather(ConstBufferView{params_.data() + own.begin, own.size(), kStorageDType<S>},
                                                    BufferView{params_.data(), params_.size(), kStorageDType<S>},
                                                    ShardCounts(shards_.numel(), comm_.world_size()))
                                   .WithContext("parameter all-gather"));
      DSLAUNCH_RETURN_IF_ERROR(dc_.Synchronize("parameter all-gather").WithContext("parameter all-gather"));
    }
    return RefreshWorkingCopy();
  }

  const ParameterLayout& layout_;
  DeviceCollectives& dc_;
  Communicator& comm_;
  const EngineOptions options_;
  const ZeroPartitioning partitioning_;
  const ShardMap shards_;  // the owned slice: ShardFor's at stages 1-3, everything at stage 0
  cudaStream_t compute_;
  LossScaler scaler_;
  const std::vector<DecaySegment> segments_;  // of the owned slice, relative to its start
  std::vector<GroupState> groups_;
  size_t gather_elements_ = 0;  // stage 3: a gather buffer's elements (the largest group)

  DeviceBuffer<D> params_;       // whole (stages 0-2) or the owned slice (stage 3)
  DeviceBuffer<float> work_;     // stages 0-2, 16-bit: the parameters in fp32 for the model
  DeviceBuffer<float> master_;   // 16-bit: the fp32 master weights of the owned slice
  DeviceBuffer<float> m_, v_;    // Adam's moments of the owned slice
  DeviceBuffer<D> grads_;        // whole (stages 0-1) or the owned slice (stages 2-3)
  DeviceBuffer<float> micro_;    // the model's fp32 micro-step gradient, whole (unless it writes grads_)
  DeviceBuffer<float> reduced_;  // stages 1-3, the owned slice: reduced parts, the step's gradient
  DeviceBuffer<double> sum_;     // the norm's sum of squares
  DeviceBuffer<float> partial_;  // the norm's partial, summed across ranks
  std::vector<DeviceBuffer<float>> pool_values_;  // stage 3: released gather buffers
  std::vector<DeviceBuffer<D>> pool_gathered_;
  size_t pool_bytes_ = 0;

  Status deferred_;  // the first failure inside the access calls
  bool model_parallel_ = false;
  bool order_before_zeroing_ = false;  // a micro-step ended: its reductions may still read micro_
  int ready_count_ = 0;
  int micro_steps_left_ = 0;
  int64_t optimizer_step_ = 0;
  int64_t applied_ = 0;
};

template <class S>
Result<std::unique_ptr<DeviceEngine>> MakeDeviceEngine(const ParameterLayout& layout, DeviceCollectives& comm,
                                                       const EngineOptions& options, const InitialValues& initial,
                                                       cudaStream_t compute) {
  auto engine = std::make_unique<DeviceZeroEngine<S>>(layout, comm, options, compute);
  DSLAUNCH_RETURN_IF_ERROR(engine->Initialise(initial));
  return std::unique_ptr<DeviceEngine>(std::move(engine));
}

}  // namespace

MemoryStats DeviceEngine::PlanBytes(const ParameterLayout& layout, const EngineOptions& options, int world, int rank) {
  switch (options.precision) {
    case Precision::kFp32: return BytesOf<float>(SizesFor<float>(layout, options, world, rank));
    case Precision::kFp16: return BytesOf<Half>(SizesFor<Half>(layout, options, world, rank));
    case Precision::kBf16: return BytesOf<BFloat16>(SizesFor<BFloat16>(layout, options, world, rank));
  }
  return {};
}

Result<std::unique_ptr<DeviceEngine>> DeviceEngine::Create(const ParameterLayout& layout, DeviceCollectives& comm,
                                                           const EngineOptions& options, const InitialValues& initial,
                                                           cudaStream_t compute) {
  DSLAUNCH_RETURN_IF_ERROR(Engine::Validate(options));
  if (options.optimizer.kind == OptimizerKind::kSgd) {
    return FailedPreconditionError("optimizer.type SGD: the device engine updates with Adam or AdamW only; use one of "
                              "them, or train on the CPU");
  }
  if (options.offload_optimizer.device != swap::OffloadDevice::kNone) {
    return FailedPreconditionError("zero_optimization.offload_optimizer: the device engine keeps the optimizer state in "
                              "device memory; remove the section, or train on the CPU");
  }
  if (options.offload_param.device != swap::OffloadDevice::kNone) {
    return FailedPreconditionError("zero_optimization.offload_param: the device engine keeps the parameters in device "
                              "memory; remove the section, or train on the CPU");
  }
  switch (options.precision) {
    case Precision::kFp32: return MakeDeviceEngine<float>(layout, comm, options, initial, compute);
    case Precision::kFp16: return MakeDeviceEngine<Half>(layout, comm, options, initial, compute);
    case Precision::kBf16: return MakeDeviceEngine<BFloat16>(layout, comm, options, initial, compute);
  }
  return InternalError("unknown precision");
}

}  // namespace dslaunch::runtime
