// Test support for bounded randomized tests of binary decoders: random byte strings and mutations
// of valid encodings (bit flips, byte changes, insertions, deletions, truncation, duplicated runs,
// and 32-bit lengths replaced by boundary values, which is where length-prefixed formats break).
// Deterministic for a given generator state, so a failing case replays from its seed and index.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>

namespace dslaunch::testing {

// Longest random string or run the helpers make: long enough to cross every field boundary of the
// messages under test, short enough that thousands of cases run in well under a second.
inline constexpr size_t kMaxRandomBytes = 96;

inline size_t RandomBelow(std::mt19937_64& rng, size_t n) {
  return n == 0 ? 0 : static_cast<size_t>(rng() % n);
}

inline std::string RandomBytes(std::mt19937_64& rng, size_t max_len = kMaxRandomBytes) {
  std::string s(RandomBelow(rng, max_len + 1), '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// A u32 that a length or count field might hold at a boundary: zero, small, the bytes left,
// one past them, the sign bit, the maximum.
inline uint32_t BoundaryU32(std::mt19937_64& rng, size_t bytes_left) {
  const uint32_t left = static_cast<uint32_t>(std::min<size_t>(bytes_left, UINT32_MAX));
  const uint32_t values[] = {0u,          1u,          2u,          4u,         left,
                             left + 1u,   left / 4u,   0x7fffffffu, 0x80000000u,
                             0xffffffffu, 0x00ffffffu, 16u << 20,   (16u << 20) + 1u};
  return values[RandomBelow(rng, std::size(values))];
}

// Applies one to four random mutations to `bytes`.
inline std::string Mutate(std::string bytes, std::mt19937_64& rng) {
  const size_t rounds = 1 + RandomBelow(rng, 4);
  for (size_t round = 0; round < rounds; ++round) {
    const size_t pos = RandomBelow(rng, bytes.size() + 1);
    switch (RandomBelow(rng, 7)) {
      case 0:  // flip a bit
        if (!bytes.empty()) bytes[pos % bytes.size()] ^= static_cast<char>(1u << RandomBelow(rng, 8));
        break;
      case 1:  // replace a byte
        if (!bytes.empty()) bytes[pos % bytes.size()] = static_cast<char>(rng());
        break;
      case 2:  // insert random bytes
        bytes.insert(pos, RandomBytes(rng, 8));
        break;
      case 3:  // delete a run
        bytes.erase(pos, RandomBelow(rng, 9));
        break;
      case 4:  // truncate
        bytes.resize(pos);
        break;
      case 5: {  // duplicate a run in place
        std::string run = bytes.substr(pos, RandomBelow(rng, 17));
        bytes.insert(pos, run);
        break;
      }
      case 6: {  // overwrite four bytes with a boundary u32 (a length or a count)
        if (bytes.size() < 4) break;
        const size_t at = pos % (bytes.size() - 3);
        const uint32_t v = BoundaryU32(rng, bytes.size() - at - 4);
        bytes[at] = static_cast<char>(v >> 24);
        bytes[at + 1] = static_cast<char>(v >> 16);
        bytes[at + 2] = static_cast<char>(v >> 8);
        bytes[at + 3] = static_cast<char>(v);
        break;
      }
    }
  }
  return bytes;
}

}  // namespace dslaunch::testing
