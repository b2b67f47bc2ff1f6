#include "runtime/engine/step_gradient.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/core/sixteen_bit_float.h"
#include "runtime/engine/storage_type.h"

namespace dslaunch::runtime {
namespace {

// Values of every magnitude bf16 and fp16 hold, and the fp32 they convert to.
std::vector<float> Values(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::ldexp(static_cast<float>(i % 13) - 6.5f, static_cast<int>(i % 29) - 14);
  return v;
}

template <class S>
void CheckConvertingMatchesFp32() {
  // More than one of the sum's conversion blocks (4096), not a multiple of it.
  const size_t n = 10000;
  std::vector<S> sixteen(n);
  std::vector<float> fp32(n);
  const std::vector<float> values = Values(n);
  FromFloat(std::span<const float>(values), std::span<S>(sixteen));
  ToFloat(std::span<const S>(sixteen), std::span<float>(fp32));

  ScratchBuffers scratch;
  StepGradient converting = StepGradient::Converting(std::span<const S>(sixteen));
  StepGradient view = StepGradient::View(fp32);
  CHECK(converting.size() == n);
  // The same bits: the sum runs over the same fp32 values in the same order.
  const double a = converting.SumOfSquares(), b = view.SumOfSquares();
  CHECK(std::memcmp(&a, &b, sizeof(double)) == 0);
  // Ranges of a sub-group size, the last one shorter; the staging buffer is reused.
  for (size_t begin = 0; begin < n; begin += 3000) {
    const size_t count = std::min<size_t>(3000, n - begin);
    std::span<float> range = converting.Range(begin, count, scratch);
    REQUIRE(range.size() == count);
    CHECK(std::memcmp(range.data(), fp32.data() + begin, count * sizeof(float)) == 0);
    range[0] = 1e30f;  // writable, and a copy: the 16-bit values stay
  }
  CHECK(scratch.peak() == 3000 * sizeof(float));
  converting.Release(scratch);
  std::vector<float> again(n);
  ToFloat(std::span<const S>(sixteen), std::span<float>(again));
  CHECK(again == fp32);
}

TEST_CASE("A converting step gradient gives the fp32 values' sum of squares and ranges, bit for bit") {
  SUBCASE("fp16") { CheckConvertingMatchesFp32<Half>(); }
  SUBCASE("bf16") { CheckConvertingMatchesFp32<BFloat16>(); }
}

TEST_CASE("A viewing step gradient's ranges are the values themselves; an owning one gives its buffer back") {
  ScratchBuffers scratch;
  std::vector<float> values = {1, 2, 3, 4, 5};
  StepGradient view = StepGradient::View(values);
  view.Range(1, 2, scratch)[0] = 20;
  CHECK(values[1] == 20);
  CHECK(view.SumOfSquares() == 1 + 400 + 9 + 16 + 25);
  CHECK(scratch.peak() == 0);

  std::vector<float> taken = scratch.Take(3);
  taken = {3, 4, 12};
  StepGradient owning = StepGradient::Owning(std::move(taken));
  CHECK(owning.SumOfSquares() == 169);
  CHECK(owning.Range(2, 1, scratch)[0] == 12);
  owning.Release(scratch);
  CHECK(owning.size() == 0);
  std::vector<float> next = scratch.Take(3);  // the mark stays at one buffer: the first was given back
  CHECK(scratch.peak() == 3 * sizeof(float));
}

}  // namespace
}  // namespace dslaunch::runtime
