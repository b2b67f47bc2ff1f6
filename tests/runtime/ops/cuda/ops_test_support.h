// What the gpu-tier tests of runtime/ops/cuda/ share: device buffers filled from and read back to
// host float vectors (16-bit values rounded on the host by runtime/core/sixteen_bit_float.h, so the
// CPU reference and the CUDA op see the same numbers), deterministic random inputs, and the
// comparison with a tolerance that scales with magnitude and dtype (as llm.c's
// dev/cuda/common.h: validate_result).
//
// Every case that launches work starts with DSLAUNCH_REQUIRE_GPU() (tests/support/gpu_device.h):
// without a device it is reported as skipped, never passed. DSLAUNCH_OPS_CASES stamps one case per element type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/core/random.h"
#include "runtime/core/sixteen_bit_float.h"
#include "runtime/ops/cuda/ops.h"
#include "tests/support/gpu_device.h"

namespace dslaunch::runtime::ops::cuda::testing {

// REQUIRE that a Status is OK, printing it when it is not.
#define DSLAUNCH_REQUIRE_OK(expr)                              \
  do {                                                         \
    const ::dslaunch::Status dslaunch_ops_status_ = (expr);    \
    REQUIRE_MESSAGE(dslaunch_ops_status_.ok(), dslaunch_ops_status_.ToString()); \
  } while (false)

// REQUIRE that a CUDA call succeeded.
#define DSLAUNCH_REQUIRE_CUDA(expr)                                                          \
  do {                                                                                       \
    const cudaError_t dslaunch_cuda_err_ = (expr);                                           \
    REQUIRE_MESSAGE(dslaunch_cuda_err_ == cudaSuccess, #expr << ": " << cudaGetErrorString(dslaunch_cuda_err_)); \
  } while (false)

// One test case per element type, each calling fn<T>() after the GPU check. Names carry no commas
// (doctest's test-case filter splits on them).
#define DSLAUNCH_OPS_CASES(name, fn)                                                        \
  TEST_CASE(name " in fp32") {                                                              \
    DSLAUNCH_REQUIRE_GPU();                                                                 \
    fn<float>();                                                                            \
  }                                                                                         \
  TEST_CASE(name " in bf16") {                                                              \
    DSLAUNCH_REQUIRE_GPU();                                                                 \
    fn<__nv_bfloat16>();                                                                    \
  }                                                                                         \
  TEST_CASE(name " in fp16") {                                                              \
    DSLAUNCH_REQUIRE_GPU();                                                                 \
    fn<__half>();                                                                           \
  }

template <typename T>
inline constexpr DType kDTypeOf = std::is_same_v<T, float> ? DType::kFloat32
                                  : std::is_same_v<T, __nv_bfloat16> ? DType::kBFloat16
                                                                     : DType::kFloat16;

// x rounded to T the way the CPU stores 16-bit values (to nearest even); exact for float.
inline float RoundTo(DType dtype, float x) {
  switch (dtype) {
    case DType::kFloat32:
      return x;
    case DType::kBFloat16:
      return BFloat16ToFloat(FloatToBFloat16(x));
    case DType::kFloat16:
      return HalfToFloat(FloatToHalf(x));
    case DType::kInt64:
    case DType::kUInt8:
      break;  // not element types of the ops
  }
  return x;
}

// `n` values uniform in [-scale, scale) from the splitmix64 stream `state`, rounded to `dtype`.
inline std::vector<float> Random(size_t n, uint64_t& state, float scale, DType dtype = DType::kFloat32) {
  std::vector<float> v(n);
  for (float& x : v) x = RoundTo(dtype, (2.0f * UniformFloat(state) - 1.0f) * scale);
  return v;
}

// Device memory of `count` elements of `dtype`, freed on destruction. Test code: failures REQUIRE.
class DeviceBuffer {
 public:
  DeviceBuffer(DType dtype, size_t count) : dtype_(dtype), count_(count) {
    DSLAUNCH_REQUIRE_CUDA(cudaMalloc(&data_, std::max<size_t>(bytes(), 1)));
  }
  // A buffer holding `values` (which should already be representable in `dtype`).
  DeviceBuffer(DType dtype, const std::vector<float>& values) : DeviceBuffer(dtype, values.size()) { Upload(values); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { (void)cudaFree(data_); }

  size_t bytes() const { return count_ * DTypeSize(dtype_); }
  size_t count() const { return count_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  void* get() const { return data_; }

  void Upload(const std::vector<float>& values) {
    REQUIRE(values.size() == count_);
    std::vector<uint16_t> bits(count_);
    const void* src = values.data();
    if (dtype_ == DType::kBFloat16) {
      for (size_t i = 0; i < count_; ++i) bits[i] = FloatToBFloat16(values[i]).bits;
      src = bits.data();
    } else if (dtype_ == DType::kFloat16) {
      for (size_t i = 0; i < count_; ++i) bits[i] = FloatToHalf(values[i]).bits;
      src = bits.data();
    }
    DSLAUNCH_REQUIRE_CUDA(cudaMemcpy(data_, src, bytes(), cudaMemcpyHostToDevice));
  }

  // The contents as floats (exact for every dtype). Synchronous: call after the stream finished.
  std::vector<float> Download() const {
    std::vector<float> out(count_);
    if (dtype_ == DType::kFloat32) {
      DSLAUNCH_REQUIRE_CUDA(cudaMemcpy(out.data(), data_, bytes(), cudaMemcpyDeviceToHost));
      return out;
    }
    const std::vector<uint16_t> bits = DownloadBits16();
    for (size_t i = 0; i < count_; ++i) {
      out[i] = dtype_ == DType::kBFloat16 ? BFloat16ToFloat(BFloat16{bits[i]}) : HalfToFloat(Half{bits[i]});
    }
    return out;
  }

  std::vector<uint16_t> DownloadBits16() const {
    REQUIRE(dtype_ != DType::kFloat32);
    std::vector<uint16_t> bits(count_);
    DSLAUNCH_REQUIRE_CUDA(cudaMemcpy(bits.data(), data_, bytes(), cudaMemcpyDeviceToHost));
    return bits;
  }

 private:
  DType dtype_;
  size_t count_;
  void* data_ = nullptr;
};

// Device ints (tokens, targets).
class DeviceInts {
 public:
  explicit DeviceInts(const std::vector<int>& values) : count_(values.size()) {
    void* raw = nullptr;
    DSLAUNCH_REQUIRE_CUDA(cudaMalloc(&raw, std::max<size_t>(count_ * sizeof(int), 1)));
    data_ = static_cast<int*>(raw);
    DSLAUNCH_REQUIRE_CUDA(cudaMemcpy(data_, values.data(), count_ * sizeof(int), cudaMemcpyHostToDevice));
  }
  DeviceInts(const DeviceInts&) = delete;
  DeviceInts& operator=(const DeviceInts&) = delete;
  ~DeviceInts() { (void)cudaFree(data_); }
  const int* get() const { return data_; }

 private:
  size_t count_;
  int* data_ = nullptr;
};

// A stream of its own for each case (so the ops' stream parameter is exercised, not the default
// stream), synchronized and checked for asynchronous errors by Finish().
class TestStream {
 public:
  TestStream() { DSLAUNCH_REQUIRE_CUDA(cudaStreamCreate(&stream_)); }
  TestStream(const TestStream&) = delete;
  TestStream& operator=(const TestStream&) = delete;
  ~TestStream() { (void)cudaStreamDestroy(stream_); }
  cudaStream_t get() const { return stream_; }
  // Waits for everything enqueued; REQUIREs that it ran without a fault.
  void Finish() const {
    DSLAUNCH_REQUIRE_CUDA(cudaStreamSynchronize(stream_));
    DSLAUNCH_REQUIRE_CUDA(cudaGetLastError());
  }

 private:
  cudaStream_t stream_ = nullptr;
};

// |got - want| <= of_rms * rms(want) + relative * |want|, element by element. Rounding errors
// scale with the magnitude of the terms that made a value, which the array's RMS tracks; the
// relative part covers the large elements. An element that cancelled to near zero is judged by the
// first part, not by its own (meaningless) relative error.
struct Tolerance {
  double of_rms;
  double relative;
};

// The tolerance of dtype T out of the three given (each stated as a named constant at the test).
template <typename T>
Tolerance ToleranceFor(Tolerance f32, Tolerance bf16, Tolerance f16) {
  if constexpr (std::is_same_v<T, float>) return f32;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return bf16;
  return f16;
}

// Checks every element (NaN only where `want` is NaN), reporting the count of bad ones and the
// worst. One CHECK per array, so a million elements do not make a million assertions.
inline void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, Tolerance tol,
                        const std::string& what) {
  REQUIRE(got.size() == want.size());
  double sum_sq = 0.0;
  size_t finite = 0;
  for (float w : want) {
    if (std::isfinite(w)) {
      sum_sq += static_cast<double>(w) * w;
      ++finite;
    }
  }
  const double rms = finite > 0 ? std::sqrt(sum_sq / static_cast<double>(finite)) : 0.0;
  size_t bad = 0, worst = 0;
  double worst_excess = -1.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    double excess;
    if (std::isnan(w) || std::isnan(g)) {
      excess = std::isnan(w) == std::isnan(g) ? 0.0 : INFINITY;
    } else if (std::isinf(w) || std::isinf(g)) {
      excess = g == w ? 0.0 : INFINITY;
    } else {
      const double bound = tol.of_rms * rms + tol.relative * std::abs(w);
      excess = std::abs(g - w) - bound;
      if (excess <= 0.0) excess = 0.0;
    }
    if (excess > 0.0) ++bad;
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
  }
  CAPTURE(what);
  CAPTURE(rms);
  CAPTURE(tol.of_rms);
  CAPTURE(tol.relative);
  CAPTURE(worst);
  const float worst_got = got.empty() ? 0.0f : got[worst], worst_want = want.empty() ? 0.0f : want[worst];
  CAPTURE(worst_got);
  CAPTURE(worst_want);
  CHECK_MESSAGE(bad == 0, bad << " of " << got.size() << " elements outside the tolerance");
}

// A cuBLASLt context for the matmul ops (REQUIREs that it could be made).
inline CublasLtContext MakeContext() {
  Result<CublasLtContext> ctx = CublasLtContext::Create();
  REQUIRE_MESSAGE(ctx.ok(), ctx.status().ToString());
  return std::move(ctx).value();
}

// `n` quiet NaNs: what output buffers start as, so that an element the op fails to write shows.
inline std::vector<float> NaNs(size_t n) { return std::vector<float>(n, NAN); }

}  // namespace dslaunch::runtime::ops::cuda::testing
