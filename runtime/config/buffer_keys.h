// The offload buffer keys that may be sized to fit the node's memory (docs/offload.md, "Buffers
// sized to fit"): which of them the user gave a number, wrote "auto", or left out. The parser
// records the source of each; runtime/train/offload_sizing.h chooses the values of the keys that
// were not given a number.
#pragma once

#include <array>
#include <string_view>

namespace dslaunch::runtime {

// How a sizable key's value was set.
enum class KeySource {
  kDefault,   // left out: DeepSpeed's default, sized when the run offloads to NVMe
  kAuto,      // "auto": always sized
  kExplicit,  // a number: used as given, refused with a value that would fit when it cannot fit
};

// The sizable keys, in the order the start-up line names them.
enum class BufferKey {
  kSubGroupSize,        // zero_optimization.sub_group_size
  kReduceBucketSize,    // zero_optimization.reduce_bucket_size
  kPrefetchBucketSize,  // zero_optimization.stage3_prefetch_bucket_size
  kOptimizerBufferCount,  // zero_optimization.offload_optimizer.buffer_count
  kParamBufferCount,    // zero_optimization.offload_param.buffer_count
  kParamBufferSize,     // zero_optimization.offload_param.buffer_size
  kParamMaxInCpu,       // zero_optimization.offload_param.max_in_cpu
};
inline constexpr int kBufferKeyCount = 7;

// The key's JSON path without "$.", as messages name it: "zero_optimization.sub_group_size".
constexpr std::string_view BufferKeyPath(BufferKey key) {
  constexpr std::array<std::string_view, kBufferKeyCount> kPaths = {
      "zero_optimization.sub_group_size",
      "zero_optimization.reduce_bucket_size",
      "zero_optimization.stage3_prefetch_bucket_size",
      "zero_optimization.offload_optimizer.buffer_count",
      "zero_optimization.offload_param.buffer_count",
      "zero_optimization.offload_param.buffer_size",
      "zero_optimization.offload_param.max_in_cpu",
  };
  return kPaths[static_cast<size_t>(key)];
}

// Where each sizable key's value came from; every key left out by default.
struct BufferKeySources {
  std::array<KeySource, kBufferKeyCount> source{};  // value-initialised: kDefault
  KeySource& operator[](BufferKey key) { return source[static_cast<size_t>(key)]; }
  KeySource operator[](BufferKey key) const { return source[static_cast<size_t>(key)]; }
};

}  // namespace dslaunch::runtime
