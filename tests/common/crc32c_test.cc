#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "tests/support/skip.h"

namespace dslaunch {
namespace {

// The definition, one bit at a time: the reference both fast paths are checked against.
uint32_t BitwiseCrc32c(const uint8_t* p, size_t n, uint32_t crc = 0) {
  uint32_t s = ~crc;
  for (size_t i = 0; i < n; ++i) {
    s ^= p[i];
    for (int bit = 0; bit < 8; ++bit) s = (s >> 1) ^ ((s & 1) ? 0x82F63B78u : 0);
  }
  return ~s;
}

std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST_CASE("Crc32c matches the published check values") {
  const std::string digits = "123456789";
  const std::vector<uint8_t> zeros(32, 0), ones(32, 0xff);
  std::vector<uint8_t> ascending(32);
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<uint8_t>(i);
  // RFC 3720 (iSCSI), appendix B.4, and the usual "123456789" check value.
  CHECK(Crc32c(digits) == 0xE3069283u);
  CHECK(Crc32c(zeros.data(), zeros.size()) == 0x8A9136AAu);
  CHECK(Crc32c(ones.data(), ones.size()) == 0x62A8AB43u);
  CHECK(Crc32c(ascending.data(), ascending.size()) == 0x46DD794Eu);
  CHECK(Crc32c(nullptr, 0) == 0u);
  CHECK(Crc32cPortable(digits.data(), digits.size()) == 0xE3069283u);
  CHECK(Crc32cPortable(zeros.data(), zeros.size()) == 0x8A9136AAu);
}

TEST_CASE("The SSE4.2 path matches the published check values") {
  DSLAUNCH_SKIP_UNLESS(Crc32cHardwareAvailable(), "sse42", "this CPU has no SSE4.2 crc32 instruction");
  const std::string digits = "123456789";
  const std::vector<uint8_t> zeros(32, 0), ones(32, 0xff);
  CHECK(Crc32cHardware(digits.data(), digits.size()) == 0xE3069283u);
  CHECK(Crc32cHardware(zeros.data(), zeros.size()) == 0x8A9136AAu);
  CHECK(Crc32cHardware(ones.data(), ones.size()) == 0x62A8AB43u);
}

TEST_CASE("Crc32c chains over chunks") {
  const auto data = RandomBytes(100000, 7);
  const uint32_t whole = Crc32c(data.data(), data.size());
  for (size_t cut : {size_t{0}, size_t{1}, size_t{7}, size_t{4095}, size_t{12289}, size_t{99999}, data.size()}) {
    CAPTURE(cut);
    CHECK(Crc32c(data.data() + cut, data.size() - cut, Crc32c(data.data(), cut)) == whole);
    CHECK(Crc32cPortable(data.data() + cut, data.size() - cut, Crc32cPortable(data.data(), cut)) == whole);
  }
  std::span<const std::byte> bytes = std::as_bytes(std::span(data));
  CHECK(Crc32c(bytes.subspan(500), Crc32c(bytes.first(500))) == whole);
}

// Lengths 0-64, around the stripe sizes of the hardware path (3 x 256 and 3 x 4096 bytes), and
// random ones, each at a random alignment and with a random or zero starting CRC.
struct CrcCase {
  size_t length, offset;
  uint32_t seed_crc;
};
std::vector<CrcCase> CrcCases() {
  std::mt19937_64 rng(1);
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 64; ++n) lengths.push_back(n);
  for (size_t edge : {768, 1536, 12288, 24576}) {
    for (size_t d = 0; d < 10; ++d) lengths.push_back(edge - 5 + d);
  }
  for (int i = 0; i < 200; ++i) lengths.push_back(rng() % 70000);
  std::vector<CrcCase> cases;
  for (size_t n : lengths) {
    const size_t offset = rng() % 16;
    const uint32_t seed_crc = (rng() & 1) ? static_cast<uint32_t>(rng()) : 0;
    cases.push_back({n, offset, seed_crc});
  }
  return cases;
}

TEST_CASE("The portable path and the dispatcher agree with the bitwise definition at any length and alignment") {
  const auto data = RandomBytes(80000, 42);
  for (const CrcCase& c : CrcCases()) {
    CAPTURE(c.length);
    CAPTURE(c.offset);
    const uint8_t* p = data.data() + c.offset;
    const uint32_t want = BitwiseCrc32c(p, c.length, c.seed_crc);
    CHECK(Crc32cPortable(p, c.length, c.seed_crc) == want);
    CHECK(Crc32c(p, c.length, c.seed_crc) == want);
  }
}

TEST_CASE("The SSE4.2 path agrees with the bitwise definition at any length and alignment") {
  DSLAUNCH_SKIP_UNLESS(Crc32cHardwareAvailable(), "sse42", "this CPU has no SSE4.2 crc32 instruction");
  const auto data = RandomBytes(80000, 42);
  for (const CrcCase& c : CrcCases()) {
    CAPTURE(c.length);
    CAPTURE(c.offset);
    const uint8_t* p = data.data() + c.offset;
    CHECK(Crc32cHardware(p, c.length, c.seed_crc) == BitwiseCrc32c(p, c.length, c.seed_crc));
  }
}

}  // namespace
}  // namespace dslaunch
