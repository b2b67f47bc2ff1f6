// EmbeddingForward / EmbeddingBackward of runtime/ops/cuda/ops.h against runtime/ops/cpu/'s.
#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/ops/cpu/ops.h"
#include "runtime/ops/cuda/ops.h"
#include "tests/runtime/ops/cuda/ops_test_support.h"

namespace dslaunch::runtime::ops::cuda::testing {
namespace {

// Forward in fp32: one addition of the same two numbers on both sides, exact up to the last bit.
constexpr Tolerance kF32Tolerance{1e-6, 1e-6};
// bf16 / fp16: the sum is rounded once to T on the GPU (at most 2^-8 / 2^-11 relative: 2.5x /
// 4x inside the tolerance).
constexpr Tolerance kBF16Tolerance{1e-2, 1e-2};
constexpr Tolerance kF16Tolerance{2e-3, 2e-3};
// The gradients are fp32 sums of the same values in another order (atomics for dwte): a few ulps
// of sums of up to B*T terms of O(1).
constexpr Tolerance kGradTolerance{1e-5, 1e-5};

template <typename T>
void CheckEmbedding(int b, int t, int c, int v, bool with_wpe, uint64_t seed) {
  const DType dt = kDTypeOf<T>;
  INFO("b=" << b << " t=" << t << " c=" << c << " v=" << v << (with_wpe ? " wpe" : " no wpe"));
  uint64_t s = seed;
  const int n = b * t;
  std::vector<int> tokens(n);
  // Few distinct tokens: many rows hit the same dwte row at once (the atomics' contention).
  for (int& tok : tokens) tok = static_cast<int>(SplitMix64(s) % static_cast<uint64_t>(v));
  const size_t nout = static_cast<size_t>(n) * c;
  const std::vector<float> wte = Random(static_cast<size_t>(v) * c, s, 1.0f, dt);
  const std::vector<float> wpe = Random(static_cast<size_t>(t) * c, s, 1.0f, dt);
  const std::vector<float> dy = Random(nout, s, 1.0f, dt);
  const std::vector<float> dwte0 = Random(static_cast<size_t>(v) * c, s, 1.0f),
                           dwpe0 = Random(static_cast<size_t>(t) * c, s, 1.0f);

  std::vector<float> y(nout), dwte = dwte0, dwpe = dwpe0;
  ops::EmbeddingForward(y.data(), tokens.data(), wte.data(), with_wpe ? wpe.data() : nullptr, b, t, c);
  ops::EmbeddingBackward(dwte.data(), with_wpe ? dwpe.data() : nullptr, dy.data(), tokens.data(), b, t, c);

  TestStream stream;
  DeviceInts d_tokens(tokens);
  DeviceBuffer d_wte(dt, wte), d_wpe(dt, wpe), d_dy(dt, dy), d_y(dt, NaNs(nout));
  DeviceBuffer d_dwte(DType::kFloat32, dwte0), d_dwpe(DType::kFloat32, dwpe0);
  DSLAUNCH_REQUIRE_OK(EmbeddingForward<T>(d_y.as<T>(), d_tokens.get(), d_wte.as<T>(),
                                          with_wpe ? d_wpe.as<T>() : nullptr, b, t, c, v, stream.get()));
  DSLAUNCH_REQUIRE_OK(EmbeddingBackward<T>(d_dwte.as<float>(), with_wpe ? d_dwpe.as<float>() : nullptr, d_dy.as<T>(),
                                           d_tokens.get(), b, t, c, v, stream.get()));
  stream.Finish();
  ExpectClose(d_y.Download(), y, ToleranceFor<T>(kF32Tolerance, kBF16Tolerance, kF16Tolerance), "out");
  ExpectClose(d_dwte.Download(), dwte, kGradTolerance, "dwte");
  ExpectClose(d_dwpe.Download(), dwpe, kGradTolerance, "dwpe");  // untouched without wpe
}

template <typename T>
void EmbeddingMatchesCpu() {
  CheckEmbedding<T>(3, 7, 37, 11, true, 1);
  CheckEmbedding<T>(3, 7, 37, 11, false, 2);
  CheckEmbedding<T>(4, 64, 96, 300, true, 3);
}

DSLAUNCH_OPS_CASES("EmbeddingForward and EmbeddingBackward match the CPU op and accumulate", EmbeddingMatchesCpu)

TEST_CASE("EmbeddingForward gives NaN rows for tokens outside the vocabulary and the backward skips them") {
  DSLAUNCH_REQUIRE_GPU();
  const int b = 1, t = 3, c = 4, v = 5;
  const std::vector<int> tokens = {2, v, -1};
  std::vector<float> wte(v * c), dy(t * c, 1.0f);
  for (size_t i = 0; i < wte.size(); ++i) wte[i] = static_cast<float>(i);
  TestStream stream;
  DeviceInts d_tokens(tokens);
  DeviceBuffer d_wte(DType::kFloat32, wte), d_y(DType::kFloat32, t * c), d_dy(DType::kFloat32, dy);
  DeviceBuffer d_dwte(DType::kFloat32, std::vector<float>(v * c, 0.0f));
  DSLAUNCH_REQUIRE_OK(EmbeddingForward<float>(d_y.as<float>(), d_tokens.get(), d_wte.as<float>(), nullptr, b, t, c, v,
                                              stream.get()));
  DSLAUNCH_REQUIRE_OK(EmbeddingBackward<float>(d_dwte.as<float>(), nullptr, d_dy.as<float>(), d_tokens.get(), b, t, c,
                                               v, stream.get()));
  stream.Finish();
  const std::vector<float> y = d_y.Download(), dwte = d_dwte.Download();
  for (int k = 0; k < c; ++k) {
    CHECK(y[k] == wte[2 * c + k]);
    CHECK(std::isnan(y[c + k]));
    CHECK(std::isnan(y[2 * c + k]));
  }
  for (int row = 0; row < v; ++row) {
    for (int k = 0; k < c; ++k) CHECK(dwte[row * c + k] == (row == 2 ? 1.0f : 0.0f));
  }
}

}  // namespace
}  // namespace dslaunch::runtime::ops::cuda::testing
