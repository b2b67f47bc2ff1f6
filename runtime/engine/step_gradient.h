// StepGradient: the step's gradient of the owned slice, averaged over ranks and still multiplied
// by the loss scale, as the optimizer step reads it: its sum of squares (for the norm), then range
// by range, one sub-group of the optimizer state at a time (docs/engine.md, "The step").
//
// Where the values are fp32 already (the reducer's own fp32 gradient, or a buffer the step's
// reduction filled) a range is a view of them. Where the reducer keeps the gradient in 16 bits
// (ZeRO 2-3 with fp16 or bf16) each range is converted when asked, into one staging buffer the
// size of the largest range: no fp32 copy of the whole slice exists, which is what lets a model
// larger than memory train with its optimizer state on disk (docs/offload.md, "Larger than
// memory"). Converting 16 bits to fp32 is exact, so the sums and the updates are the same bits
// either way. Not thread-safe.
#pragma once

#include <cstddef>
#include <span>
#include <variant>
#include <vector>

#include "runtime/core/partition.h"
#include "runtime/core/sixteen_bit_float.h"
#include "runtime/engine/scratch_buffers.h"

namespace dslaunch::runtime {

class StepGradient {
 public:
  // A view of fp32 values that outlive the gradient (the reducer's own).
  static StepGradient View(std::span<float> values);
  // fp32 values taken from ScratchBuffers, given back by Release.
  static StepGradient Owning(std::vector<float> values);
  // 16-bit values that outlive the gradient, converted range by range.
  static StepGradient Converting(std::span<const Half> values);
  static StepGradient Converting(std::span<const BFloat16> values);

  size_t size() const;
  // The sum of the squares of the fp32 values, in fp64, in element order; with `skip` (sorted,
  // disjoint ranges of element indices), of the values outside them.
  double SumOfSquares() const;
  double SumOfSquares(std::span<const ShardRange> skip) const;
  // Elements [begin, begin + count) as fp32, writable (the step scales them in place). A 16-bit
  // gradient's range lives in the staging buffer (from `scratch`) until the next call.
  std::span<float> Range(size_t begin, size_t count, ScratchBuffers& scratch);
  // Gives the buffers taken from `scratch` back.
  void Release(ScratchBuffers& scratch);

 private:
  template <class Values>
  static StepGradient Of(Values values);

  std::variant<std::span<float>, std::span<const Half>, std::span<const BFloat16>> values_;
  std::vector<float> owned_;    // Owning's values (values_ views them)
  std::vector<float> staging_;  // the last converted range
};

}  // namespace dslaunch::runtime
