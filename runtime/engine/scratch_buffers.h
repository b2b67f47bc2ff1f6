// ScratchBuffers: the engine's transient fp32 buffers (acquired groups, micro-step gradients, the
// step's gradient), taken when needed and given back after use, with the high-water mark of the
// bytes out at once. One instance is shared by the parameter store and the gradient reducer, so
// the mark is the engine's, not the sum of each part's (Engine::memory().working).
//
// A buffer given back with GiveForReuse is kept for the next Take of the same size: the step's
// gradient, taken every step at the same size, is then allocated once instead of being mapped,
// faulted in page by page and unmapped again each step (it cost about 3% of a gpt-bench step:
// docs/engine.md, "Scratch buffers"). What is kept and what is out never exceed the high-water
// mark together: a fresh allocation frees kept buffers first until they fit. Buffers given back
// with Give are freed: keeping every size (the acquired groups of stage 3) pushed a run sized to
// fit a memory cap past it (tests/scripts: offload_sized_to_fit). Not thread-safe.
#pragma once

#include <cstddef>
#include <vector>

namespace dslaunch::runtime {

class ScratchBuffers {
 public:
  // n zeroed floats, counted until given back.
  std::vector<float> Take(size_t n);
  // Takes back a buffer from Take (an empty vector is fine) and leaves `v` empty: Give frees it,
  // GiveForReuse keeps it for the next Take of its size.
  void Give(std::vector<float>&& v);
  void GiveForReuse(std::vector<float>&& v);
  // Frees the kept buffers (the engine's start-up ones, once it is built).
  void Trim();

  size_t peak() const { return peak_; }
  size_t kept_bytes() const { return kept_bytes_; }

 private:
  size_t current_ = 0;
  size_t peak_ = 0;
  size_t kept_bytes_ = 0;
  std::vector<std::vector<float>> kept_;
};

}  // namespace dslaunch::runtime
