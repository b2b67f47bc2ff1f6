// ScratchBuffers: the engine's transient fp32 buffers (acquired groups, micro-step gradients, the
// step's gradient), allocated when needed and freed after use, with the high-water mark of the
// bytes out at once. One instance is shared by the parameter store and the gradient reducer, so
// the mark is the engine's, not the sum of each part's (Engine::memory().working).
// Not thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace dslaunch::runtime {

class ScratchBuffers {
 public:
  // n zeroed floats, counted until given back.
  std::vector<float> Take(size_t n) {
    current_ += n * sizeof(float);
    peak_ = std::max(peak_, current_);
    return std::vector<float>(n);
  }
  // Frees a buffer from Take (an empty vector is fine) and leaves `v` empty.
  void Give(std::vector<float>&& v) {
    current_ -= v.size() * sizeof(float);
    v = std::vector<float>();
  }
  size_t peak() const { return peak_; }

 private:
  size_t current_ = 0;
  size_t peak_ = 0;
};

}  // namespace dslaunch::runtime
