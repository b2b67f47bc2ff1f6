// The storage types of parameters and gradients (fp32, fp16, bf16) behind one set of names, for
// the engine's parts, which are templates on the storage type S: conversions to and from fp32,
// accumulation with one rounding, and communicator views of S buffers.
#pragma once

#include <algorithm>
#include <span>
#include <type_traits>

#include "common/check.h"
#include "runtime/comm/communicator.h"
#include "runtime/core/dtype.h"
#include "runtime/core/sixteen_bit_float.h"

namespace dslaunch::runtime {

template <class S>
inline constexpr bool kIsFp32Storage = std::is_same_v<S, float>;

template <class S>
inline constexpr DType kStorageDType = std::is_same_v<S, float> ? DType::kFloat32
                                       : std::is_same_v<S, Half> ? DType::kFloat16
                                                                 : DType::kBFloat16;

inline void ToFloat(std::span<const float> in, std::span<float> out) { std::copy(in.begin(), in.end(), out.begin()); }
inline void ToFloat(std::span<const Half> in, std::span<float> out) { HalfToFloat(in, out); }
inline void ToFloat(std::span<const BFloat16> in, std::span<float> out) { BFloat16ToFloat(in, out); }
inline void FromFloat(std::span<const float> in, std::span<float> out) { std::copy(in.begin(), in.end(), out.begin()); }
inline void FromFloat(std::span<const float> in, std::span<Half> out) { FloatToHalf(in, out); }
inline void FromFloat(std::span<const float> in, std::span<BFloat16> out) { FloatToBFloat16(in, out); }

// out += in, rounded to the storage type once per element.
template <class S>
void AddInto(std::span<const float> in, std::span<S> out) {
  DSLAUNCH_CHECK(in.size() == out.size());
  if constexpr (kIsFp32Storage<S>) {
    for (size_t i = 0; i < in.size(); ++i) out[i] += in[i];
  } else {
    // Converted through a stack buffer: small enough for any thread's stack, large enough that
    // the conversion loops stay long.
    constexpr size_t kChunk = 4096;
    float tmp[kChunk];
    for (size_t at = 0; at < in.size(); at += kChunk) {
      const size_t n = std::min(kChunk, in.size() - at);
      ToFloat(std::span<const S>(out.data() + at, n), std::span<float>(tmp, n));
      for (size_t i = 0; i < n; ++i) tmp[i] += in[at + i];
      FromFloat(std::span<const float>(tmp, n), out.subspan(at, n));
    }
  }
}

template <class S>
ConstBufferView ConstView(const S* data, size_t count) {
  return {data, count, kStorageDType<S>};
}
template <class S>
BufferView MutableView(S* data, size_t count) {
  return {data, count, kStorageDType<S>};
}

}  // namespace dslaunch::runtime
