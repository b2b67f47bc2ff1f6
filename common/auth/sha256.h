// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), plus a constant-time comparison.
//
// Used to authenticate connections with the per-job secret (common/auth/handshake.h). Pure code, no
// allocation beyond the returned values; every function is thread-safe (no shared state).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dslaunch {

inline constexpr size_t kSha256DigestBytes = 32;
inline constexpr size_t kSha256BlockBytes = 64;
using Sha256Digest = std::array<uint8_t, kSha256DigestBytes>;

// Incremental SHA-256: Update() any number of times, then Finish() once. Not thread-safe; a
// finished hasher must not be updated again (checked).
class Sha256 {
 public:
  Sha256();
  void Update(std::string_view data);
  Sha256Digest Finish();

 private:
  void Compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, kSha256BlockBytes> block_{};
  size_t block_used_ = 0;
  uint64_t total_bytes_ = 0;
  bool finished_ = false;
};

// One-shot digest of `data`.
Sha256Digest Sha256Hash(std::string_view data);

// HMAC-SHA256 of `message` under `key` (any length; keys longer than a block are hashed first).
Sha256Digest HmacSha256(std::string_view key, std::string_view message);

// The digest as a byte string (32 bytes) or lower-case hex (64 characters).
std::string DigestBytes(const Sha256Digest& digest);
std::string HexEncode(std::string_view bytes);

// True when a and b are equal. The running time depends only on the lengths, never on where the
// contents differ, so a proof can be checked without leaking how much of it was right.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace dslaunch
