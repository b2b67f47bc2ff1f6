// How a model reaches its parameters and gradients: through the engine, group by group.
//
// A model's parameters are split into groups (GPT: the embeddings, each transformer block, the
// final layer norm), each a contiguous slice of the flat parameter buffer. The model asks for a
// group's fp32 values just before it uses them and says when it is done, and it accumulates a
// group's gradient into the buffer the engine gives it, then says when that gradient is complete
// for this micro-step. This is the seam where ZeRO lives: stage 0-2 hand out a resident copy;
// stage 3 all-gathers the group on Acquire (prefetching the next) and frees it on Release; stage 2
// and 3 reduce-scatter a group's gradient once it is ready. Models never see ranks or partitions.
#pragma once

#include <span>

namespace dslaunch::runtime {

class ParameterAccess {
 public:
  virtual ~ParameterAccess() = default;
  // The group's parameters (its whole slice, fp32), valid until the matching Release. A group may
  // be acquired several times per step (the tied embedding: input and output).
  virtual std::span<const float> Acquire(int group) = 0;
  virtual void Release(int group) = 0;
  // Where the backward pass accumulates (+=) the group's gradient for the current micro-step.
  virtual std::span<float> Gradient(int group) = 0;
  // The backward pass will not touch the group's gradient again in this micro-step.
  virtual void GradientReady(int group) = 0;
};

}  // namespace dslaunch::runtime
