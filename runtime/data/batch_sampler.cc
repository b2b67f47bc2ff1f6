#include "runtime/data/batch_sampler.h"

#include <numeric>
#include <utility>

#include "common/check.h"
#include "runtime/core/random.h"

namespace dslaunch::runtime {
namespace {

// Fisher-Yates permutation of [0, n) for (seed, epoch). Recomputed per call: shards here are
// small (the bundled data has tens of thousands of windows); a caller with huge shards would cache.
std::vector<int64_t> Permutation(uint64_t seed, int64_t epoch, int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  uint64_t state = seed * 0x100000001b3ull ^ static_cast<uint64_t>(epoch + 1) * 0xcbf29ce484222325ull;
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t k = static_cast<int64_t>(SplitMix64(state) % static_cast<uint64_t>(i + 1));
    std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(k)]);
  }
  return p;
}

}  // namespace

int64_t WindowForSample(uint64_t seed, const BatchGeometry& geometry, int64_t sample) {
  const int64_t w = geometry.windows();
  DSLAUNCH_CHECK(w > 0) << "no complete window of " << geometry.seq_len << " tokens in " << geometry.tokens;
  return Permutation(seed, sample / w, w)[static_cast<size_t>(sample % w)];
}

std::vector<int64_t> WindowsForMicroStep(uint64_t seed, const BatchGeometry& geometry, int64_t step,
                                         int micro_step, int rank) {
  const int64_t w = geometry.windows();
  DSLAUNCH_CHECK(w > 0) << "no complete window of " << geometry.seq_len << " tokens in " << geometry.tokens;
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(geometry.micro_batch));
  int64_t first = step * geometry.global_batch() +
                  static_cast<int64_t>(micro_step) * geometry.micro_batch * geometry.world +
                  static_cast<int64_t>(rank) * geometry.micro_batch;
  int64_t epoch = -1;
  std::vector<int64_t> perm;
  for (int i = 0; i < geometry.micro_batch; ++i) {
    int64_t sample = first + i;
    if (sample / w != epoch) {
      epoch = sample / w;
      perm = Permutation(seed, epoch, w);
    }
    out.push_back(perm[static_cast<size_t>(sample % w)]);
  }
  return out;
}

}  // namespace dslaunch::runtime
