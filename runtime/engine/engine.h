// Engine: one rank's share of data-parallel training: parameters, gradients, optimizer state,
// the gradient reduction and the optimizer step, reached by the model through ParameterAccess.
// Design, buffers and memory formulas: docs/engine.md.
//
// The interface and what crosses it (StepStats, MemoryStats, EngineSnapshot, StateReader). One
// implementation, ZeroEngine (runtime/engine/zero_engine.cc, made by Engine::Create), covers ZeRO
// stages 0-3 with fp32, fp16 or bf16 storage of the model's parameters and gradients (compute is
// fp32; the master weights the optimizer updates are fp32 in every case). It composes three parts,
// each answering one question of the stage (ZeroPartitioning, runtime/engine/engine_options.h):
//   ParameterStore (parameter_store.h): are parameters partitioned (stage 3)? Acquire, Release,
//     prefetch, and Publish of the updated parameters (all-gathered at stages 1-2).
//   GradientReducer (gradient_reducer.h): are gradients partitioned (stages 2-3)? Buckets
//     reduce-scattered during backward, or the whole gradient reduced at the step; the step's
//     gradient and its norm.
//   OptimizerStateStore (optimizer_state_store.h): where do the fp32 master weights and moments
//     of the owned slice live (ShardFor at stages 1-3, everything at 0)? In memory here, visited
//     sub-group by sub-group.
// The engine keeps the step (norm, loss scaling, clipping, the update), Snapshot and Restore.
//
// A step: BeginStep(micro_steps) zeroes the gradients; for each of the micro-steps the caller
// runs forward and backward with loss scale loss_scale() / micro_steps (the reduction of ZeRO
// 1-3 happens during backward, at ZeRO 1 the last one's; with overlap_comm on a thread of its
// own); Step() finishes the reduction, computes
// the global gradient norm, and with fp16 skips the step on every rank when any gradient
// overflowed (the dynamic loss scaler decides the next scale), else unscales, clips to
// gradient_clipping (DeepSpeed's max_norm / (norm + 1e-6)) and applies the optimizer with the
// scheduled learning rate.
//
// Collective calls happen inside Acquire (stage 3), GradientReady (stages 1-3) and Step, in the
// same order on every rank because every rank runs the same model calls. A failed collective in
// Acquire or GradientReady, which cannot return a Status, is kept and returned by the next Step()
// or status(); the communicator fails fast after its first error, so nothing hangs meanwhile.
// Not thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "runtime/comm/communicator.h"
#include "runtime/core/initial_values.h"
#include "runtime/core/param_layout.h"
#include "runtime/core/parameter_access.h"
#include "runtime/core/partition.h"
#include "runtime/engine/engine_options.h"
#include "runtime/engine/loss_scaler.h"
#include "runtime/engine/optimizer_state_store.h"
#include "runtime/swap/io_engine.h"

namespace dslaunch::runtime {

struct StepStats {
  double grad_norm = 0.0;   // unscaled, before clipping
  double lr = 0.0;          // the rate applied (of the skipped step's schedule position if skipped)
  double loss_scale = 1.0;  // the scale this step's backward used
  bool skipped = false;     // fp16 overflow: no update on any rank
  std::string scale_event;  // the loss scaler's line when it skipped or changed the scale, else empty
};

// Bytes the engine holds per rank, from its own allocations (docs/engine.md compares them with
// the ZeRO paper's formulas; docs/benchmarks.md has the table).
struct MemoryStats {
  size_t parameters = 0;       // model parameters in their storage type (whole or partition)
  size_t gradients = 0;        // gradient storage (whole or partition)
  size_t optimizer_state = 0;  // fp32 master weights (16-bit storage only) + optimizer moments
  size_t working = 0;          // transient fp32 buffers (acquired groups, buckets, step gradient):
                               // their high-water mark so far
};

// What a checkpoint saves of one rank (docs/checkpoint.md): the slice `range` =
// ShardFor(numel, world, rank) of every state tensor, whatever the ZeRO stage (at stage 0 every
// rank holds everything and saves its slice), and the counters. The spans point into the engine
// and are valid until its next Step().
struct EngineSnapshot {
  ShardRange range;
  std::vector<std::pair<std::string, std::span<const float>>> tensors;  // StateTensorNames order
  int64_t optimizer_step = 0;  // updates applied by the optimizer (Adam's t)
  int64_t applied_steps = 0;   // = optimizer_step; kept apart for the LR schedule
  LossScaler::State loss_scaler;
  // Set when the state is not resident (offloaded to swap files): the spans of `tensors` are then
  // empty and this streams tensor `index`'s part of `range` to `sink`, in order, a piece at a time
  // (one pass over the swap file per tensor, no whole copy in memory). Valid as the spans are.
  using Sink = std::function<Status(std::span<const float> piece)>;
  std::function<Status(size_t index, const Sink& sink)> stream;
};

// Fills out[0 .. end-begin) with elements [begin, end) of the saved state tensor `name`
// (flat indices of the model), from whatever shards hold them.
using StateReader = std::function<Status(const std::string& name, size_t begin, size_t end, float* out)>;

class Engine {
 public:
  // `initial` (the model's values, the same on every rank) becomes the parameters; each part of
  // the engine reads the ranges it holds, so the whole fp32 model is never in memory at once
  // (runtime/core/initial_values.h). `comm` and `layout` must outlive the engine. Fails with kInvalidArgument for options that cannot work
  // (a stage outside 0-3, an fp16 section out of range, a wrong initial size). With
  // options.offload_optimizer.device nvme it first removes stale swap files under nvme_path and
  // checks the directory (kFailedPrecondition naming the key and path: missing, not writable, too
  // small), then creates this rank's swap file (removed when the engine is destroyed).
  static Result<std::unique_ptr<Engine>> Create(const ParameterLayout& layout, Communicator& comm,
                                                const EngineOptions& options, const InitialValues& initial);
  // The same from values in memory (layout.numel() of them).
  static Result<std::unique_ptr<Engine>> Create(const ParameterLayout& layout, Communicator& comm,
                                                const EngineOptions& options, std::span<const float> initial);
  // The checks of Create on the options alone (every engine makes them): kInvalidArgument naming
  // the train.json key.
  static Status Validate(const EngineOptions& options);
  virtual ~Engine() = default;

  virtual ParameterAccess& access() = 0;
  // The ranks that hold the model's other parts (a pipeline group, a tensor group:
  // docs/parallelism.md), none by default: the step's gradient norm then sums over each group in
  // turn, so that clipping, the reported norm and fp16's overflow decision are the whole model's,
  // the same on every part. `counted_elsewhere` (sorted, disjoint ranges of the flat buffer) are
  // gradients another rank of the groups holds too (a tensor group's whole tensors on every tensor
  // rank but the first): left out of this rank's share, so that each counts once. The groups must
  // outlive the engine; every rank of them takes part in each Step.
  virtual void SetModelParallelGroups(std::vector<Communicator*> groups,
                                      std::vector<ShardRange> counted_elsewhere = {}) = 0;
  // What the backward pass multiplies the loss by (the fp16 loss scale; 1 otherwise).
  virtual double loss_scale() const = 0;
  // Starts a step of `micro_steps` forward and backward passes (gradient_accumulation_steps).
  virtual void BeginStep(int micro_steps) = 0;
  virtual Result<StepStats> Step() = 0;
  // OK, or the first failure of a collective made inside access() (also returned by Step()).
  virtual Status status() const = 0;
  // Collective: every rank receives the full fp32 master weights (layout.numel() values).
  virtual Status GatherParameters(std::span<float> out) = 0;
  virtual MemoryStats memory() const = 0;
  // This rank's swap-file I/O so far, parameters and optimizer state together (io_engine.h's
  // counts): all zero when everything is in memory.
  virtual swap::IoStats swap_io() const = 0;
  virtual int64_t applied_steps() const = 0;
  // This rank's lines for the log from setting up state on disk (stale swap files removed, O_DIRECT
  // or io_uring unavailable), to print once at start; empty when everything is in memory.
  virtual std::vector<std::string> notes() const = 0;

  // This rank's part of a checkpoint (no collective).
  virtual EngineSnapshot Snapshot() const = 0;
  // Collective: restores the state from a checkpoint of any world size and ZeRO stage. Each rank
  // reads the ranges it holds through `read`, takes the counters given, and the parameters in
  // their storage type are rebuilt from the master weights (all-gathered where the stage needs
  // them whole). After a failure the engine's state is unspecified: do not train on.
  virtual Status Restore(const StateReader& read, int64_t optimizer_step, int64_t applied_steps,
                         const LossScaler::State& loss_scaler) = 0;
};

}  // namespace dslaunch::runtime
