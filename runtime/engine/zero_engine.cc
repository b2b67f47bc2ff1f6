// ZeroEngine: the one implementation of Engine (runtime/engine/engine.h), ZeRO stages 0-3 built from
// its three parts, and Engine::Create, which makes it for the storage type of the options.
#include "runtime/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "common/check.h"
#include "runtime/core/sixteen_bit_float.h"
#include "runtime/engine/collective_queue.h"
#include "runtime/engine/deferred_status.h"
#include "runtime/engine/gradient_reducer.h"
#include "runtime/comm/agreement.h"
#include "runtime/engine/nvme_optimizer_state_store.h"
#include "runtime/engine/parameter_store.h"
#include "runtime/engine/scratch_buffers.h"
#include "runtime/engine/shard_map.h"
#include "runtime/engine/step_rules.h"
#include "runtime/engine/storage_type.h"
#include "runtime/swap/swap_directory.h"

namespace dslaunch::runtime {
namespace {

// The optimizer state over the owned slice: with fp32 storage the master weights are the owned
// parameters themselves, updated in place; with 16-bit storage, or parameters offloaded to disk,
// a separate fp32 copy of the owned part of `initial`.
template <class S>
std::unique_ptr<OptimizerStateStore> MakeStateStore(const OptimizerParams& optimizer, ParameterStore<S>& params,
                                                    const ShardRange& own, const InitialValues& initial) {
  if constexpr (kIsFp32Storage<S>) {
    if (!params.offloaded()) return InMemoryOptimizerStateStore::Borrowing(optimizer, params.Owned());
  }
  std::vector<float> master(own.size());
  initial(own.begin, master);
  return InMemoryOptimizerStateStore::Owning(optimizer, std::move(master));
}

bool Offloaded(const EngineOptions& options) { return options.offload_optimizer.device == swap::OffloadDevice::kNvme; }

// The JSON path of the setting CheckSwapDirectory's errors name.
constexpr std::string_view kOptimizerNvmePathKey = "zero_optimization.offload_optimizer.nvme_path";

// Before any rank creates its swap file: stale files of ended runs removed (each one a line in
// `notes`) and the directory checked for this rank's bytes.
Status PrepareSwapDirectory(const EngineOptions& options, size_t numel, std::vector<std::string>& notes) {
  const std::string& dir = options.offload_optimizer.nvme_path;
  DSLAUNCH_ASSIGN_OR_RETURN(std::vector<swap::StaleSwapFile> stale, swap::RemoveStaleSwapFiles(dir));
  for (const swap::StaleSwapFile& f : stale) notes.push_back(swap::DescribeRemoval(f));
  return swap::CheckSwapDirectory(dir, NvmeStateBytes(options.optimizer, numel), kOptimizerNvmePathKey);
}

// The optimizer state in a swap file (docs/offload.md "The optimizer state on disk"), created and
// filled with the owned slice `own` of the initial parameters. Its warnings go to `notes`.
Result<std::unique_ptr<OptimizerStateStore>> MakeNvmeStateStore(const EngineOptions& options, const ShardRange& own,
                                                               const InitialValues& initial, int rank,
                                                               std::vector<std::string>& notes) {
  NvmeStateOptions nvme{options.offload_optimizer, options.aio, static_cast<size_t>(options.zero.sub_group_size), rank};
  const InitialValues master = [&](size_t begin, std::span<float> out) { initial(own.begin + begin, out); };
  DSLAUNCH_ASSIGN_OR_RETURN(std::unique_ptr<NvmeOptimizerStateStore> store,
                            NvmeOptimizerStateStore::Create(options.optimizer, own.size(), master, nvme));
  for (const std::string& w : store->warnings()) notes.push_back(w);
  return std::unique_ptr<OptimizerStateStore>(std::move(store));
}

template <class S>
class ZeroEngine final : public Engine, private ParameterAccess {
 public:
  ZeroEngine(const ParameterLayout& layout, Communicator& comm, const EngineOptions& options,
             const InitialValues& initial, std::unique_ptr<ParameterSwap<S>> swap)
      : queue_(options.zero.overlap_comm && comm.world_size() > 1 && PartitioningFor(options.zero.stage).optimizer_state),
        comm_(comm, queue_),
        options_(options),
        partitioning_(PartitioningFor(options.zero.stage)),
        shards_(layout.numel(), comm.world_size(), comm.rank(), partitioning_.optimizer_state),
        params_(layout, comm_, options.zero, partitioning_.parameters, shards_, scratch_, deferred_, initial,
                std::move(swap)),
        grads_(layout, comm, options.zero, partitioning_.gradients, shards_, scratch_, deferred_, queue_),
        state_(Offloaded(options) ? nullptr : MakeStateStore<S>(options.optimizer, params_, shards_.own(), initial)),
        scaler_(options.precision == Precision::kFp16 ? options.loss_scaler : LossScalerConfig{}),
        segments_(OwnedSegments(layout, shards_.own())) {
    scratch_.Trim();  // the start-up reads' buffers: training takes others
  }

  // Collective: the second half of construction where the state goes to disk. Every rank sweeps
  // and checks before any rank creates its file (a sweep cannot meet a file being created by this
  // job), and every rank fails when one does.
  Status OpenSwap(const InitialValues& initial) {
    if (!Offloaded(options_)) return Status::Ok();
    const ShardRange& own = shards_.own();
    DSLAUNCH_RETURN_IF_ERROR(
        AgreeOnFailure(comm_, PrepareSwapDirectory(options_, own.size(), state_notes_), "prepare the swap directory"));
    auto store = MakeNvmeStateStore(options_, own, initial, comm_.rank(), state_notes_);
    DSLAUNCH_RETURN_IF_ERROR(AgreeOnFailure(comm_, store.status(), "create its swap file"));
    state_ = std::move(*store);
    return Status::Ok();
  }

  ParameterAccess& access() override { return *this; }
  void SetModelParallelGroups(std::vector<Communicator*> groups, std::vector<ShardRange> counted_elsewhere) override {
    model_parallel_ = std::move(groups);
    counted_elsewhere_ = std::move(counted_elsewhere);
  }
  double loss_scale() const override { return options_.precision == Precision::kFp16 ? scaler_.scale() : 1.0; }
  Status status() const override { return deferred_.status(); }
  int64_t applied_steps() const override { return applied_; }
  std::vector<std::string> notes() const override {
    std::vector<std::string> all = params_.notes();
    all.insert(all.end(), state_notes_.begin(), state_notes_.end());
    return all;
  }

  void BeginStep(int micro_steps) override { grads_.BeginStep(micro_steps); }

  Result<StepStats> Step() override {
    grads_.Finish();
    DSLAUNCH_RETURN_IF_ERROR(deferred_.status());
    grads_.CheckAllReady();
    params_.DropPrefetched();

    StepStats stats;
    stats.loss_scale = loss_scale();
    DSLAUNCH_ASSIGN_OR_RETURN(StepGradient gradient, grads_.ReduceForStep());
    Status status = UpdateWith(gradient, stats);
    gradient.Release(scratch_);
    DSLAUNCH_RETURN_IF_ERROR(status);
    if (stats.skipped) return stats;
    DSLAUNCH_RETURN_IF_ERROR(params_.Publish());
    ++applied_;
    return stats;
  }

  Status GatherParameters(std::span<float> out) override {
    DSLAUNCH_CHECK(out.size() == shards_.numel());
    const ShardRange& own = shards_.own();
    DSLAUNCH_RETURN_IF_ERROR(state_->ForEachSubGroup(StateAccess::kRead, [&](const StateSubGroup& sub) {
      const std::span<float> master = sub.master();
      std::copy(master.begin(), master.end(), out.begin() + static_cast<std::ptrdiff_t>(own.begin + sub.begin));
      return Status::Ok();
    }));
    if (!shards_.partitioned()) return Status::Ok();
    return comm_.AllGather(std::span<const float>(out.data() + own.begin, own.size()), out,
                           ShardCounts(shards_.numel(), comm_.world_size()))
        .WithContext("parameter gather");
  }

  EngineSnapshot Snapshot() const override {
    EngineSnapshot snap;
    snap.range = ShardFor(shards_.numel(), comm_.world_size(), comm_.rank());
    // Offset of the saved slice inside the held state: 0 at stages 1-3 (the owned slice is it).
    const size_t at = snap.range.begin - shards_.own().begin;
    const std::vector<std::string> names = StateTensorNames(options_.optimizer);
    const std::vector<std::span<const float>> tensors = state_->Resident();
    for (size_t i = 0; i < names.size(); ++i) {
      snap.tensors.emplace_back(names[i], tensors.empty() ? std::span<const float>()
                                                          : tensors[i].subspan(at, snap.range.size()));
    }
    if (tensors.empty()) {
      OptimizerStateStore* state = state_.get();
      const size_t end = at + snap.range.size();
      snap.stream = [state, at, end](size_t index, const EngineSnapshot::Sink& sink) {
        return StreamTensor(*state, index, at, end, sink);
      };
    }
    snap.optimizer_step = state_->step();
    snap.applied_steps = applied_;
    snap.loss_scaler = scaler_.state();
    return snap;
  }

  Status Restore(const StateReader& read, int64_t optimizer_step, int64_t applied_steps,
                 const LossScaler::State& loss_scaler) override {
    const std::vector<std::string> names = StateTensorNames(options_.optimizer);
    const size_t base = shards_.own().begin;
    DSLAUNCH_RETURN_IF_ERROR(state_->ForEachSubGroup(StateAccess::kWrite, [&](const StateSubGroup& sub) {
      const size_t begin = base + sub.begin, end = begin + sub.size();
      for (size_t i = 0; i < names.size(); ++i) DSLAUNCH_RETURN_IF_ERROR(read(names[i], begin, end, sub.tensors[i].data()));
      params_.WriteOwned(sub.begin, sub.master());
      return Status::Ok();
    }));
    state_->set_step(optimizer_step);
    applied_ = applied_steps;
    if (options_.precision == Precision::kFp16) scaler_.Restore(loss_scaler);
    params_.DropPrefetched();
    return params_.Publish();
  }

  swap::IoStats swap_io() const override { return swap::Combined(params_.io(), state_->io()); }

  MemoryStats memory() const override {
    MemoryStats m;
    m.parameters = params_.bytes();
    m.gradients = grads_.bytes();
    m.optimizer_state = state_->bytes();
    m.working = scratch_.peak() + grads_.bucket_bytes() + params_.staging_bytes();
    return m;
  }

 private:
  // ---- ParameterAccess: parameters from the store, gradients to the reducer ----

  std::span<const float> Acquire(int g) override { return params_.Acquire(g); }
  void Release(int g) override { params_.Release(g); }
  std::span<float> Gradient(int g) override { return grads_.Gradient(g); }
  void GradientReady(int g) override { grads_.GradientReady(g); }

  // Tensor `index` of the held state's elements [begin, end), sub-group by sub-group, to `sink`.
  static Status StreamTensor(OptimizerStateStore& state, size_t index, size_t begin, size_t end,
                             const EngineSnapshot::Sink& sink) {
    return state.ForEachSubGroup(StateAccess::kRead, [&](const StateSubGroup& sub) -> Status {
      const size_t from = std::max(begin, sub.begin), to = std::min(end, sub.begin + sub.size());
      if (from >= to) return Status::Ok();
      return sink(sub.tensors[index].subspan(from - sub.begin, to - from));
    });
  }

  // ---- The step ----

  // The norm of `gradient`, the decision on overflow, and the update unless the step is skipped;
  // fills `stats`.
  Status UpdateWith(StepGradient& gradient, StepStats& stats) {
    DSLAUNCH_ASSIGN_OR_RETURN(double sum, grads_.GlobalSumOfSquares(gradient, counted_elsewhere_));
    for (Communicator* group : model_parallel_) {
      if (group->world_size() == 1) continue;
      float whole = static_cast<float>(sum);  // a sum of fp32 partials, as the data group's
      DSLAUNCH_RETURN_IF_ERROR(group->AllReduce(std::span<float>(&whole, 1), ReduceOp::kSum)
                                   .WithContext("gradient norm over the model's parts"));
      sum = whole;
    }
    stats.grad_norm = std::sqrt(sum) / stats.loss_scale;
    stats.lr = LearningRateForAppliedSteps(options_.schedule, options_.optimizer.lr, applied_);
    DSLAUNCH_ASSIGN_OR_RETURN(const bool skip, DecideOnOverflow(options_.precision, scaler_, stats));
    if (skip) return Status::Ok();
    return Update(stats.lr, UnscaleCoefficient(options_.gradient_clipping, stats), gradient);
  }

  // The optimizer update, sub-group by sub-group of the owned state, each with its range of the
  // gradient unscaled (`coef`) in place; each updated sub-group's master weights go to the
  // parameter store in their storage type.
  Status Update(double lr, double coef, StepGradient& gradient) {
    const int64_t t = state_->step() + 1;
    DSLAUNCH_RETURN_IF_ERROR(state_->ForEachSubGroup(StateAccess::kReadWrite, [&](const StateSubGroup& sub) {
      const std::span<float> grads = gradient.Range(sub.begin, sub.size(), scratch_);
      if (coef != 1.0) {
        const float c = static_cast<float>(coef);
        for (float& g : grads) g *= c;
      }
      OptimizerUpdate(options_.optimizer, lr, t, sub.master(), grads,
                      SegmentsWithin(segments_, sub.begin, sub.begin + sub.size()), sub.m(), sub.v());
      params_.WriteOwned(sub.begin, sub.master());
      return Status::Ok();
    }));
    state_->set_step(t);
    return Status::Ok();
  }

  // The gradient reducer's jobs use the engine's communicator directly; everything else here goes
  // through comm_, which waits for the queue first.
  CollectiveQueue queue_;
  QueuedCommunicator comm_;
  const EngineOptions options_;
  const ZeroPartitioning partitioning_;
  const ShardMap shards_;  // the owned slice: ShardFor's at stages 1-3, everything at stage 0
  ScratchBuffers scratch_;  // shared by the parts: one high-water mark
  DeferredStatus deferred_;  // shared by the parts: the first failure
  ParameterStore<S> params_;
  GradientReducer<S> grads_;
  std::unique_ptr<OptimizerStateStore> state_;
  LossScaler scaler_;
  const std::vector<DecaySegment> segments_;  // of the owned slice, relative to its start
  int64_t applied_ = 0;
  std::vector<Communicator*> model_parallel_;  // SetModelParallelGroups
  std::vector<ShardRange> counted_elsewhere_;
  std::vector<std::string> state_notes_;  // from opening the optimizer state on disk (notes())
};

// With offload_param on nvme (stage 3), the swap is created first: it can fail (the directory,
// the disk), a constructor cannot.
template <class S>
Result<std::unique_ptr<Engine>> MakeEngine(const ParameterLayout& layout, Communicator& comm,
                                           const EngineOptions& options, const InitialValues& initial) {
  std::unique_ptr<ParameterSwap<S>> swap;
  if (options.offload_param.device == swap::OffloadDevice::kNvme) {
    const ShardMap shards(layout.numel(), comm.world_size(), comm.rank(), true);
    DSLAUNCH_ASSIGN_OR_RETURN(swap, ParameterSwap<S>::Create(layout, shards, options.zero, options.offload_param,
                                                             options.aio, comm, initial));
  }
  auto engine = std::make_unique<ZeroEngine<S>>(layout, comm, options, initial, std::move(swap));
  // No "rank N" context here: the worker adds it once, at its edge (runtime/worker_main.cc).
  DSLAUNCH_RETURN_IF_ERROR(engine->OpenSwap(initial));
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::Create(const ParameterLayout& layout, Communicator& comm,
                                               const EngineOptions& options, std::span<const float> initial) {
  if (initial.size() != layout.numel()) {
    return InvalidArgumentError("initial parameters: " + std::to_string(initial.size()) + " values for a model of " +
                                std::to_string(layout.numel()));
  }
  return Create(layout, comm, options, InitialValuesIn(initial));
}

Status Engine::Validate(const EngineOptions& options) {
  if (options.zero.stage < 0 || options.zero.stage > kMaxZeroStage) {
    return InvalidArgumentError("zero_optimization.stage " + std::to_string(options.zero.stage) +
                                " does not exist; use 0, 1, 2 or 3");
  }
  if (options.precision == Precision::kFp16) DSLAUNCH_RETURN_IF_ERROR(ValidateLossScalerConfig(options.loss_scaler));
  DSLAUNCH_RETURN_IF_ERROR(swap::ValidateOffloadParamConfig(options.offload_param, options.zero.stage, kOffloadParamKey));
  DSLAUNCH_RETURN_IF_ERROR(swap::ValidateOffloadOptimizerConfig(options.offload_optimizer));
  DSLAUNCH_RETURN_IF_ERROR(swap::ValidateAioConfig(options.aio));
  if (options.zero.sub_group_size < 1) {
    return InvalidArgumentError("zero_optimization.sub_group_size: must be >= 1, got " +
                                std::to_string(options.zero.sub_group_size));
  }
  return Status::Ok();
}

Result<std::unique_ptr<Engine>> Engine::Create(const ParameterLayout& layout, Communicator& comm,
                                               const EngineOptions& options, const InitialValues& initial) {
  DSLAUNCH_RETURN_IF_ERROR(Validate(options));
  switch (options.precision) {
    case Precision::kFp32: return MakeEngine<float>(layout, comm, options, initial);
    case Precision::kFp16: return MakeEngine<Half>(layout, comm, options, initial);
    case Precision::kBf16: return MakeEngine<BFloat16>(layout, comm, options, initial);
  }
  return InternalError("unknown precision");
}

}  // namespace dslaunch::runtime
