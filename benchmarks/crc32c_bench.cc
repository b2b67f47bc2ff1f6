// Throughput of Crc32c's two paths (SSE4.2 three-stream and portable slice-by-8) over one buffer,
// 256 MiB by default (larger than any cache, as when checksumming a checkpoint). Warms up once,
// checks that the paths agree, and reports the best of --iters runs in GB/s (10^9 bytes/s).
// Built with the benchmarks, not registered with CTest: run bin/crc32c_bench [MiB] [iters].
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/crc32c.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename Fn>
double BestGbPerSecond(const std::vector<unsigned char>& buffer, int iters, uint32_t expected, Fn crc) {
  double best = 0;
  for (int i = 0; i <= iters; ++i) {  // run 0 is the warm-up
    const auto start = Clock::now();
    const uint32_t got = crc(buffer.data(), buffer.size());
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (got != expected) {
      std::fprintf(stderr, "crc32c_bench: paths disagree: %08x vs %08x\n", got, expected);
      std::exit(1);
    }
    if (i > 0 && buffer.size() / seconds / 1e9 > best) best = buffer.size() / seconds / 1e9;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 5;
  std::vector<unsigned char> buffer(mib << 20);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (auto& b : buffer) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b = static_cast<unsigned char>(x);
  }
  const uint32_t expected = dslaunch::Crc32cPortable(buffer.data(), buffer.size());
  std::printf("crc32c over %zu MiB, best of %d runs after a warm-up\n", mib, iters);
  std::printf("  portable slice-by-8:  %6.2f GB/s\n",
              BestGbPerSecond(buffer, iters, expected, [](const void* p, size_t n) {
                return dslaunch::Crc32cPortable(p, n);
              }));
  if (dslaunch::Crc32cHardwareAvailable()) {
    std::printf("  sse4.2 (3 streams):   %6.2f GB/s\n",
                BestGbPerSecond(buffer, iters, expected, [](const void* p, size_t n) {
                  return dslaunch::Crc32cHardware(p, n);
                }));
  } else {
    std::printf("  sse4.2: not available on this CPU\n");
  }
  return 0;
}
