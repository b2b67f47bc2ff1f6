// Deterministic random numbers for initialisation, sample order and synthetic data: the same
// values on every platform and library version (the std:: distributions are implementation-
// defined, so a seed would not mean the same run everywhere).
#pragma once

#include <cstdint>

namespace dslaunch::runtime {

// What one splitmix64 draw adds to its state.
inline constexpr uint64_t kSplitMix64Increment = 0x9e3779b97f4a7c15ull;

// splitmix64 (Steele, Lea, Flood 2014): advances `state` and returns 64 well-mixed bits.
inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += kSplitMix64Increment);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The state after `draws` more draws, in O(1): the state is a counter (the mixing is applied to
// what is returned, not kept), so a stream can be entered anywhere. Wraps modulo 2^64 as the
// draws themselves do.
inline uint64_t SkipSplitMix64(uint64_t state, uint64_t draws) { return state + draws * kSplitMix64Increment; }

// Uniform in [0, 1) from the top 24 bits: every value exact in a float.
inline float UniformFloat(uint64_t& state) {
  return static_cast<float>(SplitMix64(state) >> 40) * (1.0f / 16777216.0f);
}

}  // namespace dslaunch::runtime
