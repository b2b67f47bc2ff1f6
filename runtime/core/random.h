// Deterministic random numbers for initialisation, sample order and synthetic data: the same
// values on every platform and library version (the std:: distributions are implementation-
// defined, so a seed would not mean the same run everywhere).
#pragma once

#include <cstdint>

namespace dslaunch::runtime {

// splitmix64 (Steele, Lea, Flood 2014): advances `state` and returns 64 well-mixed bits.
inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) from the top 24 bits: every value exact in a float.
inline float UniformFloat(uint64_t& state) {
  return static_cast<float>(SplitMix64(state) >> 40) * (1.0f / 16777216.0f);
}

}  // namespace dslaunch::runtime
