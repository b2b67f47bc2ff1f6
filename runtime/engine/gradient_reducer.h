// GradientReducer: the model's gradients in their storage type S, their reduction across ranks,
// and the step's gradient; the answer to "are gradients partitioned?" (ZeRO 2-3,
// docs/engine.md "The engine's three parts").
//
//   not partitioned (ZeRO 0-1): every rank accumulates the whole gradient over the micro-steps
//     (fp32 storage: the model adds into it directly; 16-bit: the group's fp32 micro-step gradient
//     is added with one rounding when it is ready). At the step it is all-reduced (ZeRO 0) or
//     reduce-scattered into the owned slice (ZeRO 1), in chunks of reduce_bucket_size.
//   partitioned (ZeRO 2-3): a rank keeps only the gradient of its slice. A group's fp32
//     micro-step gradient is packed into a bucket when ready; a full bucket, or the micro-step's
//     last group, is reduce-scattered (average) and this rank's part added to its slice.
//
// Collectives inside GradientReady record their failure in the shared DeferredStatus; the
// step's own collectives return theirs. The communicator, layout, shard map, scratch buffers and
// deferred status must outlive the reducer. Not thread-safe.
#pragma once

#include <span>
#include <vector>

#include "common/status.h"
#include "runtime/comm/communicator.h"
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
                  const ShardMap& shards, ScratchBuffers& scratch, DeferredStatus& deferred);

  // Zeroes the gradients for a new step.
  void BeginStep();
  // ParameterAccess::Gradient/GradientReady (runtime/core/parameter_access.h).
  std::span<float> Gradient(int g);
  void GradientReady(int g);

  // Reduce-scatters a bucket still pending (partitioned only); a failure goes to DeferredStatus.
  void Flush();
  // DSLAUNCH_CHECKs that every group's micro-step gradient was reported ready.
  void CheckAllReady() const;
  // Collective (ZeRO 0-1; none at ZeRO 2-3, reduced already): the step's gradient, valid until
  // BeginStep; Release it to the scratch buffers after the update. At ZeRO 2-3 it is the reducer's
  // own gradient (16-bit storage converted range by range); at ZeRO 0-1 a reduced fp32 copy,
  // except fp32 storage at ZeRO 0, reduced in place.
  Result<StepGradient> ReduceForStep();
  // Collective where the step's gradient is a slice (ZeRO 1-3): the sum of squares of the whole
  // averaged gradient, from every rank's `gradient` (summed in fp32 across ranks, as DeepSpeed).
  Result<double> GlobalSumOfSquares(const StepGradient& gradient);

  size_t bytes() const { return grads_.size() * sizeof(S); }
  // Bytes of the kept bucket (ZeRO 2-3).
  size_t bucket_bytes() const { return bucket_.capacity() * sizeof(float); }

 private:
  struct Group {
    std::vector<float> grad;  // the micro-step's fp32 gradient, until GradientReady
    bool active = false;
  };

  const ParameterGroup& Info(int g) const { return layout_.groups()[static_cast<size_t>(g)]; }
  void AppendToBucket(const ParameterGroup& group, std::span<const float> grad);
  StepGradient OwnedSlice();
  Result<StepGradient> AllReduceWhole();
  Result<StepGradient> ReduceScatterWhole();

  const ParameterLayout& layout_;
  Communicator& comm_;
  const bool partitioned_;
  const ShardMap& shards_;
  ScratchBuffers& scratch_;
  DeferredStatus& deferred_;
  std::vector<S> grads_;  // whole, or the owned slice when partitioned
  std::vector<Group> groups_;
  std::vector<float> bucket_;
  size_t bucket_capacity_ = 0;  // also the chunk of the step's reduction at ZeRO 0-1
  size_t bucket_lo_ = 0, bucket_hi_ = 0;
  int ready_count_ = 0;
};

}  // namespace dslaunch::runtime
