// CRC-32C (Castagnoli): reflected polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF.
// The checksum of safetensors checkpoint files (docs/safetensors.md). Check values:
// "123456789" -> 0xE3069283, 32 zero bytes -> 0x8A9136AA.
//
// Crc32c() picks, once per process, the SSE4.2 `crc32` instruction where the CPU has it and a
// portable slice-by-8 table otherwise; both give identical results. Pure functions with no mutable
// state: thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace dslaunch {

// The CRC-32C of `size` bytes at `data`, continuing from `crc`, the CRC-32C of the bytes before
// them (0 for none). Chaining gives the CRC of the concatenation:
//   Crc32c(b, nb, Crc32c(a, na)) == CRC-32C of a followed by b.
// `data` may be null when `size` is 0.
uint32_t Crc32c(const void* data, size_t size, uint32_t crc = 0);

inline uint32_t Crc32c(std::span<const std::byte> data, uint32_t crc = 0) {
  return Crc32c(data.data(), data.size(), crc);
}
inline uint32_t Crc32c(std::string_view data, uint32_t crc = 0) {
  return Crc32c(data.data(), data.size(), crc);
}

// `crc` as meta.json and the error messages write it: 8 lowercase hex digits ("1a2b3c4d").
std::string Crc32cText(uint32_t crc);

// The two implementations behind Crc32c(), for tests and the benchmark (benchmarks/crc32c_bench.cc).
// Crc32cHardware requires Crc32cHardwareAvailable() (checked: it aborts otherwise).
bool Crc32cHardwareAvailable();
uint32_t Crc32cPortable(const void* data, size_t size, uint32_t crc = 0);
uint32_t Crc32cHardware(const void* data, size_t size, uint32_t crc = 0);

}  // namespace dslaunch
