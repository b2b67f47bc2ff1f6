// Which token windows each rank reads at each step: a pure function of the seed, the step and the
// sample's index in the global batch, so that
//   - a resumed run sees exactly the data an uninterrupted run would, and
//   - the data of a step does not depend on how the global batch is split over ranks and
//     micro-steps: world size 1, 2 or 4 with the same global batch train on the same samples
//     (the cross-world-size equivalence tests rely on this).
//
// A shard of N tokens holds W = (N - 1) / T windows of T input tokens (targets are shifted by
// one). Global sample g = step * B + j (B = global batch, j in [0, B)) is window
// Permutation(seed, epoch)[g mod W] with epoch = g / W: every window once per epoch, in an order
// that changes each epoch. Within a step, micro-step m of rank r takes samples
// j = m * (micro * world) + r * micro + i for i in [0, micro). Specified in docs/data.md.
#pragma once

#include <cstdint>
#include <vector>

namespace dslaunch::runtime {

struct BatchGeometry {
  int64_t tokens = 0;   // tokens in the shard
  int seq_len = 0;      // T
  int micro_batch = 0;  // sequences per rank per micro-step
  int accumulation = 1;
  int world = 1;
  int64_t global_batch() const { return static_cast<int64_t>(micro_batch) * accumulation * world; }
  int64_t windows() const { return seq_len > 0 && tokens > 1 ? (tokens - 1) / seq_len : 0; }
};

// The window index (its first token is window * seq_len) of global sample `sample` (step * B + j).
// Precondition: geometry.windows() > 0.
int64_t WindowForSample(uint64_t seed, const BatchGeometry& geometry, int64_t sample);

// The window indices rank `rank` reads at micro-step `micro_step` of step `step`, in order.
std::vector<int64_t> WindowsForMicroStep(uint64_t seed, const BatchGeometry& geometry, int64_t step,
                                         int micro_step, int rank);

}  // namespace dslaunch::runtime
