#include "common/auth/sha256.h"

#include <algorithm>
#include <cstring>

#include "common/check.h"

namespace dslaunch {
namespace {

// FIPS 180-4 section 4.2.2: the first 32 bits of the fractional parts of the cube roots of the
// first 64 primes.
constexpr std::array<uint32_t, 64> kRoundConstants = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

// FIPS 180-4 section 5.3.3: the first 32 bits of the fractional parts of the square roots of the
// first 8 primes.
constexpr std::array<uint32_t, 8> kInitialState = {
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

constexpr uint32_t RotateRight(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
constexpr uint32_t Choose(uint32_t x, uint32_t y, uint32_t z) { return (x & y) ^ (~x & z); }
constexpr uint32_t Majority(uint32_t x, uint32_t y, uint32_t z) {
  return (x & y) ^ (x & z) ^ (y & z);
}
constexpr uint32_t BigSigma0(uint32_t x) {
  return RotateRight(x, 2) ^ RotateRight(x, 13) ^ RotateRight(x, 22);
}
constexpr uint32_t BigSigma1(uint32_t x) {
  return RotateRight(x, 6) ^ RotateRight(x, 11) ^ RotateRight(x, 25);
}
constexpr uint32_t SmallSigma0(uint32_t x) {
  return RotateRight(x, 7) ^ RotateRight(x, 18) ^ (x >> 3);
}
constexpr uint32_t SmallSigma1(uint32_t x) {
  return RotateRight(x, 17) ^ RotateRight(x, 19) ^ (x >> 10);
}

// RFC 2104: the inner and outer pad bytes.
constexpr uint8_t kInnerPad = 0x36;
constexpr uint8_t kOuterPad = 0x5c;

}  // namespace

Sha256::Sha256() : state_(kInitialState) {}

void Sha256::Compress(const uint8_t* block) {
  std::array<uint32_t, 64> w;
  for (int t = 0; t < 16; ++t) {
    w[t] = (uint32_t{block[4 * t]} << 24) | (uint32_t{block[4 * t + 1]} << 16) |
           (uint32_t{block[4 * t + 2]} << 8) | uint32_t{block[4 * t + 3]};
  }
  for (int t = 16; t < 64; ++t) {
    w[t] = SmallSigma1(w[t - 2]) + w[t - 7] + SmallSigma0(w[t - 15]) + w[t - 16];
  }
  uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
  uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
  for (int t = 0; t < 64; ++t) {
    uint32_t t1 = h + BigSigma1(e) + Choose(e, f, g) + kRoundConstants[t] + w[t];
    uint32_t t2 = BigSigma0(a) + Majority(a, b, c);
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state_[0] += a;
  state_[1] += b;
  state_[2] += c;
  state_[3] += d;
  state_[4] += e;
  state_[5] += f;
  state_[6] += g;
  state_[7] += h;
}

void Sha256::Update(std::string_view data) {
  DSLAUNCH_CHECK(!finished_) << "Sha256::Update after Finish";
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  size_t n = data.size();
  total_bytes_ += n;
  if (block_used_ > 0) {
    size_t take = std::min(n, kSha256BlockBytes - block_used_);
    std::memcpy(block_.data() + block_used_, p, take);
    block_used_ += take;
    p += take;
    n -= take;
    if (block_used_ < kSha256BlockBytes) return;
    Compress(block_.data());
    block_used_ = 0;
  }
  for (; n >= kSha256BlockBytes; p += kSha256BlockBytes, n -= kSha256BlockBytes) Compress(p);
  std::memcpy(block_.data(), p, n);
  block_used_ = n;
}

Sha256Digest Sha256::Finish() {
  DSLAUNCH_CHECK(!finished_) << "Sha256::Finish called twice";
  uint64_t bit_length = total_bytes_ * 8;
  // Padding (FIPS 180-4 section 5.1.1): a 1 bit, zeros, then the 64-bit big-endian bit length,
  // so that the message ends on a block boundary.
  block_[block_used_++] = 0x80;
  if (block_used_ > kSha256BlockBytes - 8) {
    std::memset(block_.data() + block_used_, 0, kSha256BlockBytes - block_used_);
    Compress(block_.data());
    block_used_ = 0;
  }
  std::memset(block_.data() + block_used_, 0, kSha256BlockBytes - 8 - block_used_);
  for (int i = 0; i < 8; ++i) {
    block_[kSha256BlockBytes - 1 - i] = static_cast<uint8_t>(bit_length >> (8 * i));
  }
  Compress(block_.data());
  finished_ = true;
  Sha256Digest out;
  for (int i = 0; i < 8; ++i) {
    out[4 * i] = static_cast<uint8_t>(state_[i] >> 24);
    out[4 * i + 1] = static_cast<uint8_t>(state_[i] >> 16);
    out[4 * i + 2] = static_cast<uint8_t>(state_[i] >> 8);
    out[4 * i + 3] = static_cast<uint8_t>(state_[i]);
  }
  return out;
}

Sha256Digest Sha256Hash(std::string_view data) {
  Sha256 h;
  h.Update(data);
  return h.Finish();
}

Sha256Digest HmacSha256(std::string_view key, std::string_view message) {
  std::array<uint8_t, kSha256BlockBytes> key_block{};
  if (key.size() > kSha256BlockBytes) {
    Sha256Digest k = Sha256Hash(key);
    std::memcpy(key_block.data(), k.data(), k.size());
  } else {
    std::memcpy(key_block.data(), key.data(), key.size());
  }
  std::string pad(kSha256BlockBytes, '\0');
  for (size_t i = 0; i < kSha256BlockBytes; ++i) {
    pad[i] = static_cast<char>(key_block[i] ^ kInnerPad);
  }
  Sha256 inner;
  inner.Update(pad);
  inner.Update(message);
  Sha256Digest inner_digest = inner.Finish();
  for (size_t i = 0; i < kSha256BlockBytes; ++i) {
    pad[i] = static_cast<char>(key_block[i] ^ kOuterPad);
  }
  Sha256 outer;
  outer.Update(pad);
  outer.Update(DigestBytes(inner_digest));
  return outer.Finish();
}

std::string DigestBytes(const Sha256Digest& digest) {
  return std::string(reinterpret_cast<const char*>(digest.data()), digest.size());
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    auto b = static_cast<uint8_t>(c);
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  return out;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  // volatile keeps the compiler from turning the loop into an early-exit memcmp.
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = diff | static_cast<uint8_t>(a[i] ^ b[i]);
  }
  return diff == 0;
}

}  // namespace dslaunch
