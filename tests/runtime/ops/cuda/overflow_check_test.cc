// HasInfOrNaN of runtime/ops/cuda/ops.h against runtime/core/sixteen_bit_float.h's, for fp32, fp16
// and bf16 buffers.
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "runtime/core/sixteen_bit_float.h"
#include "runtime/ops/cuda/ops.h"
#include "tests/runtime/ops/cuda/ops_test_support.h"

namespace dslaunch::runtime::ops::cuda::testing {
namespace {

// Elements: over one grid-stride pass of the kernel (2^16 blocks of 256) so that the loop's later
// passes are looked at too, and not a multiple of anything.
constexpr long kCount = (1L << 24) + 77;

// The GPU's answer for `values` stored as `dtype`, with the flag starting at `start`.
int GpuFlag(const std::vector<float>& values, DType dtype, int start) {
  TestStream stream;
  DeviceBuffer data(dtype, values);
  void* raw = nullptr;
  DSLAUNCH_REQUIRE_CUDA(cudaMalloc(&raw, sizeof(int)));
  int* flag = static_cast<int*>(raw);
  DSLAUNCH_REQUIRE_CUDA(cudaMemcpy(flag, &start, sizeof(int), cudaMemcpyHostToDevice));
  DSLAUNCH_REQUIRE_OK(HasInfOrNaN(data.get(), static_cast<long>(values.size()), dtype, flag, stream.get()));
  stream.Finish();
  int result = -1;
  DSLAUNCH_REQUIRE_CUDA(cudaMemcpy(&result, flag, sizeof(int), cudaMemcpyDeviceToHost));
  (void)cudaFree(flag);
  return result;
}

// The CPU's answer for `values` stored as `dtype`.
bool CpuHasInfOrNaN(const std::vector<float>& values, DType dtype) {
  if (dtype == DType::kFloat32) return runtime::HasInfOrNaN(std::span<const float>(values));
  if (dtype == DType::kBFloat16) {
    std::vector<BFloat16> v(values.size());
    FloatToBFloat16(values, v);
    return runtime::HasInfOrNaN(std::span<const BFloat16>(v));
  }
  std::vector<Half> v(values.size());
  FloatToHalf(values, v);
  return runtime::HasInfOrNaN(std::span<const Half>(v));
}

void CheckDType(DType dtype) {
  INFO("dtype=" << static_cast<int>(dtype));
  uint64_t s = 1;
  // The largest finite values of each type are not overflows.
  const float largest = dtype == DType::kFloat32    ? std::numeric_limits<float>::max()
                        : dtype == DType::kFloat16 ? kHalfMax
                                               : BFloat16ToFloat(BFloat16{0x7F7F});
  std::vector<float> clean = Random(static_cast<size_t>(kCount), s, 100.0f, dtype);
  clean[3] = largest;
  clean[4] = -largest;
  clean[5] = 0.0f;
  CHECK(!CpuHasInfOrNaN(clean, dtype));
  CHECK(GpuFlag(clean, dtype, 0) == 0);
  // The flag is only ever set: a clean buffer leaves an earlier 1 alone.
  CHECK(GpuFlag(clean, dtype, 1) == 1);

  const float specials[] = {INFINITY, -INFINITY, std::numeric_limits<float>::quiet_NaN()};
  const size_t places[] = {0, static_cast<size_t>(kCount) / 2, static_cast<size_t>(kCount) - 1};
  for (float special : specials) {
    for (size_t place : places) {
      CAPTURE(special);
      CAPTURE(place);
      std::vector<float> dirty = clean;
      dirty[place] = special;
      CHECK(CpuHasInfOrNaN(dirty, dtype));
      CHECK(GpuFlag(dirty, dtype, 0) == 1);
    }
  }
  if (dtype == DType::kFloat16) {
    // 65520 rounds to fp16 infinity: an fp32 value that overflows when stored in fp16.
    std::vector<float> rounded_up = clean;
    rounded_up[7] = 65520.0f;
    CHECK(CpuHasInfOrNaN(rounded_up, dtype));
    CHECK(GpuFlag(rounded_up, dtype, 0) == 1);
  }
}

TEST_CASE("HasInfOrNaN finds inf and NaN anywhere in fp32 buffers") {
  DSLAUNCH_REQUIRE_GPU();
  CheckDType(DType::kFloat32);
}

TEST_CASE("HasInfOrNaN finds inf and NaN anywhere in fp16 buffers") {
  DSLAUNCH_REQUIRE_GPU();
  CheckDType(DType::kFloat16);
}

TEST_CASE("HasInfOrNaN finds inf and NaN anywhere in bf16 buffers") {
  DSLAUNCH_REQUIRE_GPU();
  CheckDType(DType::kBFloat16);
}

}  // namespace
}  // namespace dslaunch::runtime::ops::cuda::testing
