// Test support: counts the bytes the current thread requests from operator new while an
// AllocationCounter is alive, so that a test can bound what a decoder allocates for a given input
// (a length or count read from the wire must never turn into a huge allocation).
//
// Link tests/support/allocation_counter.cc into the test binary: it replaces the global
// operator new(size_t) (the other forms of new in libstdc++ call it). Counting is per thread and
// costs one thread-local check per allocation when no counter is alive.
#pragma once

#include <cstddef>

namespace dslaunch::testing {

// The allocation bound of the wire decoders' randomized tests: a decoder may request this many
// bytes per input byte, plus kDecoderAllocationSlack (a std::string or map node per few bytes of
// input, an environment entry's map node of about 100 bytes for 8 bytes of frame, vector
// growth). A length or count taken from the wire without checking it against the input would
// request far more.
inline constexpr size_t kDecoderAllocationPerInputByte = 16;
inline constexpr size_t kDecoderAllocationSlack = 1024;

class AllocationCounter {
 public:
  AllocationCounter();
  ~AllocationCounter();
  AllocationCounter(const AllocationCounter&) = delete;
  AllocationCounter& operator=(const AllocationCounter&) = delete;

  // Bytes requested on this thread since construction (not net of frees).
  size_t bytes() const { return bytes_; }
  // The largest single request since construction.
  size_t largest() const { return largest_; }

 private:
  friend void CountAllocation(size_t n);
  size_t bytes_ = 0;
  size_t largest_ = 0;
  AllocationCounter* outer_ = nullptr;
};

}  // namespace dslaunch::testing
