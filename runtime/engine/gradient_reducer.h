// GradientReducer: the model's gradients in their storage type S, their reduction across ranks,
// and the step's gradient; the answer to "are gradients partitioned?" (ZeRO 2-3,
// docs/engine.md "The engine's three parts").
//
//   not partitioned (ZeRO 0-1): every rank accumulates the whole gradient over the micro-steps
//     (fp32 storage: the model adds into it directly; 16-bit: the group's fp32 micro-step gradient
//     is added with one rounding when it is ready). ZeRO 0 all-reduces it at the step, in chunks
//     of reduce_bucket_size. ZeRO 1 reduce-scatters it into the owned slice during the last
//     micro-step's backward: as groups report ready, runs of them of up to reduce_bucket_size
//     elements.
//   partitioned (ZeRO 2-3): a rank keeps only the gradient of its slice. A group's fp32
//     micro-step gradient is packed into a bucket when ready; a full bucket, or the micro-step's
//     last group, is reduce-scattered (average) and this rank's part added to its slice.
//
// The reductions made during backward are jobs of a CollectiveQueue: run at once, or with
// overlap_comm on the queue's thread while the backward goes on, two buckets (or 16-bit staging
// buffers at ZeRO 1) taking turns (docs/engine.md "Overlapped reduction"). Finish() waits for
// them and keeps their first failure in the shared DeferredStatus; the step's own collectives
// return theirs. The communicator (used by the queue's jobs and, after Finish, by the step),
// queue, layout, shard map, scratch buffers and deferred status must outlive the reducer.
// Not thread-safe.
#pragma once

#include <span>
#include <vector>

#include "common/status.h"
#include "runtime/comm/communicator.h"
#include "runtime/engine/collective_queue.h"
#include "runtime/core/param_layout.h"
#include "runtime/engine/deferred_status.h"
#include "runtime/engine/engine_options.h"
#include "runtime/engine/scratch_buffers.h"
#include "runtime/engine/shard_map.h"
#include "runtime/engine/step_gradient.h"

namespace dslaunch::runtime {

template <class S>
class GradientReducer {
 public:
  GradientReducer(const ParameterLayout& layout, Communicator& comm, const ZeroConfig& zero, bool partitioned,
                  const ShardMap& shards, ScratchBuffers& scratch, DeferredStatus& deferred,
                  CollectiveQueue& queue);
  // Waits for the reductions still queued.
  ~GradientReducer();

  // Zeroes the gradients for a new step of `micro_steps` backward passes.
  void BeginStep(int micro_steps);
  // ParameterAccess::Gradient/GradientReady (runtime/core/parameter_access.h).
  std::span<float> Gradient(int g);
  void GradientReady(int g);

  // Submits the run still pending, waits for every queued reduction, and records the first
  // failure in DeferredStatus.
  void Finish();
  // DSLAUNCH_CHECKs that every micro-step announced ran and reported every group ready.
  void CheckAllReady() const;
  // Collective at ZeRO 0 (none at ZeRO 1-3, reduced already), after Finish: the step's gradient,
  // valid until BeginStep; Release it to the scratch buffers after the update. At ZeRO 2-3 it is
  // the reducer's own gradient (16-bit storage converted range by range); at ZeRO 0-1 a reduced
  // fp32 copy, except fp32 storage at ZeRO 0, reduced in place.
  Result<StepGradient> ReduceForStep();
  // Collective where the step's gradient is a slice (ZeRO 1-3): the sum of squares of the whole
  // averaged gradient, from every rank's `gradient` (summed in fp32 across ranks, as DeepSpeed).
  // Elements of the flat buffer in `skip` (sorted, disjoint) are left out of this rank's share.
  Result<double> GlobalSumOfSquares(const StepGradient& gradient, std::span<const ShardRange> skip = {});

  size_t bytes() const { return grads_.size() * sizeof(S); }
  // Bytes of the kept buckets and their reduced parts (ZeRO 2-3), or staging buffers (ZeRO 1
  // with 16-bit storage).
  size_t bucket_bytes() const;

 private:
  struct Group {
    std::vector<float> grad;  // the micro-step's fp32 gradient, until GradientReady
    bool active = false;
  };

  // A buffer a queued job reads (a bucket, or ZeRO 1's 16-bit staging), reused once `ticket` is
  // done. A bucket's job reduces into a buffer of its own (freed when it ends, as the bucket's
  // reduced part was before jobs ran on a thread).
  struct Slot {
    std::vector<float> input;
    CollectiveQueue::Ticket ticket = 0;
  };

  const ParameterGroup& Info(int g) const { return layout_.groups()[static_cast<size_t>(g)]; }
  // Whether this micro-step's backward reduces (ZeRO 2-3: every one; ZeRO 1: the last).
  bool ReducesNow() const;
  // Adds `group` to the pending run (submitting the run first when it does not continue it or
  // would pass the capacity); ZeRO 2-3 copy `grad` into the filling bucket.
  void AddToRun(const ParameterGroup& group, std::span<const float> grad);
  // Submits the pending run's reduce-scatter to the queue.
  void SubmitRun();
  // The slot to fill next, once its last job is done.
  Slot& FreeSlot();
  StepGradient OwnedSlice();
  Result<StepGradient> AllReduceWhole();

  const ParameterLayout& layout_;
  Communicator& comm_;
  const bool partitioned_;
  const ShardMap& shards_;
  ScratchBuffers& scratch_;
  DeferredStatus& deferred_;
  CollectiveQueue& queue_;
  std::vector<S> grads_;  // whole, or the owned slice when partitioned
  std::vector<Group> groups_;
  std::vector<float> step_;  // ZeRO 1: the owned slice of the step's gradient, reduced in backward
  Slot slots_[2];            // the second only with a threaded queue
  int filling_ = 0;          // the slot the pending run is copied into
  size_t largest_part_ = 0;  // the largest reduced part of a bucket so far (ZeRO 2-3)
  size_t bucket_capacity_ = 0;  // also the chunk of ZeRO 0's reduction
  size_t run_lo_ = 0, run_hi_ = 0;  // the pending run [run_lo_, run_hi_) of flat elements
  int ready_count_ = 0;      // groups reported ready in this micro-step
  int micro_steps_left_ = 0;  // micro-steps of this step not yet done
};

}  // namespace dslaunch::runtime
