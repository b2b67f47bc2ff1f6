// Test support for the swap tests: io_uring's availability and deterministic byte patterns.
// Temporary directories: testing::TempDir(parent) (tests/support/subprocess.h) with /var/tmp
// (disk) or /dev/shm (tmpfs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "runtime/swap/io_engine.h"

namespace dslaunch::testing {

// Whether io_uring can be set up here (a container's seccomp profile may refuse it).
inline bool UringAvailable() {
  return !runtime::swap::MakeIoEngine(runtime::swap::IoBackend::kUring, runtime::swap::AioConfig{}).warning;
}

// Byte `i` of the pattern with `seed`: distinct per position and per seed, so a record read
// from the wrong offset or a stale buffer shows.
inline std::byte PatternByte(uint64_t seed, uint64_t i) {
  uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<std::byte>(x & 0xff);
}

inline void FillPattern(std::span<std::byte> bytes, uint64_t seed) {
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = PatternByte(seed, i);
}

// The index of the first byte that differs from the pattern, or -1.
inline long FirstMismatch(std::span<const std::byte> bytes, uint64_t seed) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != PatternByte(seed, i)) return static_cast<long>(i);
  }
  return -1;
}

}  // namespace dslaunch::testing
