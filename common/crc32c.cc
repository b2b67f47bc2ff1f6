#include "common/crc32c.h"

#include <bit>
#include <cstdio>
#include <cstring>

#include "common/check.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DSLAUNCH_CRC32C_X86 1
#include <nmmintrin.h>
#else
#define DSLAUNCH_CRC32C_X86 0
#endif

// Both paths work on the raw CRC register: the public functions invert on the way in and out
// (initial value and final xor 0xFFFFFFFF), which is what makes results chain.
namespace dslaunch {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78;  // Castagnoli, bit-reversed

// ---- Portable path: slice-by-8 ----------------------------------------------------------------
// t[0] advances the register by one byte; t[k] by one byte followed by k zero bytes, so eight
// lookups advance it by a whole 64-bit word.
struct SliceTables {
  uint32_t t[8][256];
};

constexpr SliceTables MakeSliceTables() {
  SliceTables s{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c >> 1) ^ ((c & 1) ? kPolynomial : 0);
    s.t[0][i] = c;
  }
  for (int k = 1; k < 8; ++k) {
    for (int i = 0; i < 256; ++i) s.t[k][i] = (s.t[k - 1][i] >> 8) ^ s.t[0][s.t[k - 1][i] & 0xff];
  }
  return s;
}
constexpr SliceTables kSlice = MakeSliceTables();

uint64_t LoadLittleEndian64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

uint32_t RawPortable(uint32_t s, const uint8_t* p, size_t n) {
  const auto& t = kSlice.t;
  for (; n >= 8; p += 8, n -= 8) {
    const uint64_t w = LoadLittleEndian64(p) ^ s;
    s = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^ t[5][(w >> 16) & 0xff] ^ t[4][(w >> 24) & 0xff] ^
        t[3][(w >> 32) & 0xff] ^ t[2][(w >> 40) & 0xff] ^ t[1][(w >> 48) & 0xff] ^ t[0][w >> 56];
  }
  for (; n > 0; ++p, --n) s = kSlice.t[0][(s ^ *p) & 0xff] ^ (s >> 8);
  return s;
}

#if DSLAUNCH_CRC32C_X86
// ---- Hardware path: SSE4.2 crc32, three interleaved streams -----------------------------------
// One crc32 instruction has a latency of 3 cycles and a throughput of 1 per cycle, so a single
// dependency chain runs at a third of the possible speed. The buffer is cut into stripes of
// three blocks hashed in parallel (A from the running register, B and C from 0) and joined with
// the linearity of the raw register:
//   raw(s, A|B|C) = Z(Z(raw(s, A)) ^ raw(0, B)) ^ raw(0, C),   Z = "append one block of zeros",
// a linear map on 32 bits, applied with four table lookups.

// A linear map on GF(2)^32 as the images of the 32 unit vectors.
struct Linear32 {
  uint32_t col[32];
};

constexpr uint32_t Apply(const Linear32& m, uint32_t x) {
  uint32_t r = 0;
  for (int j = 0; j < 32; ++j) {
    if ((x >> j) & 1) r ^= m.col[j];
  }
  return r;
}

constexpr Linear32 Compose(const Linear32& a, const Linear32& b) {  // a after b
  Linear32 r{};
  for (int j = 0; j < 32; ++j) r.col[j] = Apply(a, b.col[j]);
  return r;
}

// Z for `bytes` zero bytes, by repeated squaring of the one-bit step.
constexpr Linear32 ZerosOperator(uint64_t bytes) {
  Linear32 step{};
  step.col[0] = kPolynomial;
  for (int j = 1; j < 32; ++j) step.col[j] = uint32_t{1} << (j - 1);
  Linear32 result{};
  for (int j = 0; j < 32; ++j) result.col[j] = uint32_t{1} << j;
  for (uint64_t bits = bytes * 8; bits != 0; bits >>= 1) {
    if (bits & 1) result = Compose(step, result);
    step = Compose(step, step);
  }
  return result;
}

struct ShiftTable {
  uint32_t t[4][256];
};

constexpr ShiftTable MakeShiftTable(uint64_t bytes) {
  const Linear32 z = ZerosOperator(bytes);
  ShiftTable s{};
  for (int k = 0; k < 4; ++k) {
    for (uint32_t v = 0; v < 256; ++v) s.t[k][v] = Apply(z, v << (8 * k));
  }
  return s;
}

uint32_t Shift(const ShiftTable& z, uint32_t x) {
  return z.t[0][x & 0xff] ^ z.t[1][(x >> 8) & 0xff] ^ z.t[2][(x >> 16) & 0xff] ^ z.t[3][x >> 24];
}

// Block sizes of the stripes: long blocks for the bulk, short ones so that buffers of a few KiB
// also run three streams. Multiples of 8 (one crc32 per 64-bit word).
constexpr size_t kLongBlock = 4096;
constexpr size_t kShortBlock = 256;
constexpr ShiftTable kLongShift = MakeShiftTable(kLongBlock);
constexpr ShiftTable kShortShift = MakeShiftTable(kShortBlock);

template <size_t kBlock>
__attribute__((target("sse4.2"))) uint32_t HardwareStripes(uint32_t s, const uint8_t*& p, size_t& n,
                                                           const ShiftTable& zeros) {
  for (; n >= 3 * kBlock; p += 3 * kBlock, n -= 3 * kBlock) {
    uint64_t a = s, b = 0, c = 0;
    for (size_t i = 0; i < kBlock; i += 8) {
      a = _mm_crc32_u64(a, LoadLittleEndian64(p + i));
      b = _mm_crc32_u64(b, LoadLittleEndian64(p + kBlock + i));
      c = _mm_crc32_u64(c, LoadLittleEndian64(p + 2 * kBlock + i));
    }
    s = Shift(zeros, Shift(zeros, static_cast<uint32_t>(a)) ^ static_cast<uint32_t>(b)) ^
        static_cast<uint32_t>(c);
  }
  return s;
}

__attribute__((target("sse4.2"))) uint32_t RawHardware(uint32_t s, const uint8_t* p, size_t n) {
  for (; n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0; ++p, --n) s = _mm_crc32_u8(s, *p);
  s = HardwareStripes<kLongBlock>(s, p, n, kLongShift);
  s = HardwareStripes<kShortBlock>(s, p, n, kShortShift);
  uint64_t s64 = s;
  for (; n >= 8; p += 8, n -= 8) s64 = _mm_crc32_u64(s64, LoadLittleEndian64(p));
  s = static_cast<uint32_t>(s64);
  for (; n > 0; ++p, --n) s = _mm_crc32_u8(s, *p);
  return s;
}
#endif  // DSLAUNCH_CRC32C_X86

}  // namespace

bool Crc32cHardwareAvailable() {
#if DSLAUNCH_CRC32C_X86
  static const bool available = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") != 0;
  }();
  return available;
#else
  return false;
#endif
}

uint32_t Crc32cPortable(const void* data, size_t size, uint32_t crc) {
  return ~RawPortable(~crc, static_cast<const uint8_t*>(data), size);
}

uint32_t Crc32cHardware(const void* data, size_t size, uint32_t crc) {
  DSLAUNCH_CHECK(Crc32cHardwareAvailable()) << "Crc32cHardware on a CPU without SSE4.2";
#if DSLAUNCH_CRC32C_X86
  return ~RawHardware(~crc, static_cast<const uint8_t*>(data), size);
#else
  return crc;  // unreachable: the check above fails
#endif
}

uint32_t Crc32c(const void* data, size_t size, uint32_t crc) {
  static const bool hardware = Crc32cHardwareAvailable();
#if DSLAUNCH_CRC32C_X86
  if (hardware) return ~RawHardware(~crc, static_cast<const uint8_t*>(data), size);
#endif
  (void)hardware;
  return Crc32cPortable(data, size, crc);
}

std::string Crc32cText(uint32_t crc) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08x", crc);
  return buf;
}

}  // namespace dslaunch
