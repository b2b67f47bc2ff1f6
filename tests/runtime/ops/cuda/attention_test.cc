// AttentionForward / AttentionBackward of runtime/ops/cuda/ops.h against runtime/ops/cpu/'s.
#include <cstdint>
#include <vector>

#include "runtime/ops/cpu/ops.h"
#include "runtime/ops/cuda/ops.h"
#include "tests/runtime/ops/cuda/ops_test_support.h"

namespace dslaunch::runtime::ops::cuda::testing {
namespace {

// fp32: cuBLASLt (no TF32) and OpenBLAS sum in different orders, expf against SimdExp (2 ulp):
// ~1e-6 of the RMS. A mask off by one, a missing 1/sqrt(hs), swapped q and k or a lost
// accumulation are O(1).
constexpr Tolerance kF32Tolerance{1e-4, 1e-4};
// bf16: beyond each output's rounding (at most 2^-8 relative), the GPU rounds its intermediates
// to bf16: the scores before the softmax (forward), dP and dS (backward), as llm.c does. With
// scores under ~1.3 (q, k uniform in [-1, 1]) that moves probabilities by under 1% and the
// gradients by under 1% of their RMS.
constexpr Tolerance kBF16Tolerance{3e-2, 3e-2};
// fp16: the same with 2^-11 per rounding.
constexpr Tolerance kF16Tolerance{5e-3, 5e-3};

// Columns [part * c, (part + 1) * c) of each row of a [rows][3c] array: q, k or v, so that each is
// judged against its own RMS (the gradients of q and k are smaller than v's).
std::vector<float> Part(const std::vector<float>& qkv, int c, int part) {
  std::vector<float> out;
  out.reserve(qkv.size() / 3);
  for (size_t row = 0; row < qkv.size() / (3 * static_cast<size_t>(c)); ++row) {
    const float* base = qkv.data() + row * 3 * c + static_cast<size_t>(part) * c;
    out.insert(out.end(), base, base + c);
  }
  return out;
}

template <typename T>
void CheckAttention(int b, int t, int c, int nh, uint64_t seed) {
  const DType dt = kDTypeOf<T>;
  const Tolerance tol = ToleranceFor<T>(kF32Tolerance, kBF16Tolerance, kF16Tolerance);
  INFO("b=" << b << " t=" << t << " c=" << c << " nh=" << nh);
  uint64_t s = seed;
  const size_t nqkv = static_cast<size_t>(b) * t * 3 * c, nout = static_cast<size_t>(b) * t * c,
               natt = static_cast<size_t>(b) * nh * t * t;
  const std::vector<float> qkv = Random(nqkv, s, 1.0f, dt), dy = Random(nout, s, 1.0f, dt);
  // The increments of dq, dk, dv are ~0.01-0.1 here; start values of that size.
  const std::vector<float> dqkv0 = Random(nqkv, s, 0.05f, dt);

  std::vector<float> out(nout), att(natt);
  ops::AttentionForward(out.data(), att.data(), qkv.data(), b, t, c, nh);
  // The backward's input is the CPU's att rounded to T (the op is checked on its own).
  std::vector<float> att_t = att;
  for (float& p : att_t) p = RoundTo(dt, p);
  std::vector<float> dqkv = dqkv0;
  ops::AttentionBackward(dqkv.data(), dy.data(), qkv.data(), att_t.data(), b, t, c, nh);

  CublasLtContext ctx = MakeContext();
  TestStream stream;
  DeviceBuffer d_qkv(dt, qkv), d_dy(dt, dy), d_out(dt, NaNs(nout)), d_att(dt, NaNs(natt));
  DeviceBuffer d_att_t(dt, att_t), d_dqkv(dt, dqkv0);
  // Scratch starts as NaN: the backward must write before it reads.
  DeviceBuffer d_scratch(dt, NaNs(static_cast<size_t>(AttentionBackwardScratchElements(t, nh))));
  DSLAUNCH_REQUIRE_OK(
      AttentionForward<T>(ctx, d_out.as<T>(), d_att.as<T>(), d_qkv.as<T>(), b, t, c, nh, stream.get()));
  DSLAUNCH_REQUIRE_OK(AttentionBackward<T>(ctx, d_dqkv.as<T>(), d_scratch.as<T>(), d_dy.as<T>(), d_qkv.as<T>(),
                                           d_att_t.as<T>(), b, t, c, nh, stream.get()));
  stream.Finish();
  ExpectClose(d_att.Download(), att, tol, "att");
  ExpectClose(d_out.Download(), out, tol, "out");
  const std::vector<float> got = d_dqkv.Download();
  ExpectClose(Part(got, c, 0), Part(dqkv, c, 0), tol, "dq");
  ExpectClose(Part(got, c, 1), Part(dqkv, c, 1), tol, "dk");
  ExpectClose(Part(got, c, 2), Part(dqkv, c, 2), tol, "dv");
}

template <typename T>
void AttentionMatchesCpu() {
  CheckAttention<T>(2, 37, 24, 3, 1);   // hs 8, T not a multiple of anything
  CheckAttention<T>(2, 64, 128, 2, 2);  // hs 64 (GPT-2's), aligned
  CheckAttention<T>(1, 130, 48, 4, 3);  // hs 12, T over two 64-row blocks of the CPU op
  CheckAttention<T>(3, 1, 16, 2, 4);    // one position: softmax of a single score
}

DSLAUNCH_OPS_CASES("AttentionForward and AttentionBackward match the CPU op and accumulate", AttentionMatchesCpu)

TEST_CASE("Attention launchers reject a head count that does not divide C") {
  DSLAUNCH_REQUIRE_GPU();
  CublasLtContext ctx = MakeContext();
  float dummy = 0.0f;
  const Status forward = AttentionForward<float>(ctx, &dummy, &dummy, &dummy, 1, 4, 10, 3, nullptr);
  CHECK(forward.code() == StatusCode::kInvalidArgument);
  const Status backward = AttentionBackward<float>(ctx, &dummy, &dummy, &dummy, &dummy, &dummy, 1, 4, 10, 3, nullptr);
  CHECK(backward.code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dslaunch::runtime::ops::cuda::testing
