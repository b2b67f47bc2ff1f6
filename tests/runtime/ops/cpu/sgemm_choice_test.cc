// The kernel choice's pure parts (runtime/ops/cpu/sgemm_choice.h): candidates per CPU, the probe's
// shapes and lines, the rule and the start-up line; and this process's probe (sgemm_probe.h): its
// exactness check and its timing.
#include "runtime/ops/cpu/sgemm_choice.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>

#include "runtime/ops/cpu/ops.h"
#include "runtime/ops/cpu/sgemm_probe.h"

namespace dslaunch::runtime::ops {
namespace {

KernelRate Rate(std::string core, std::string kernel, double gflops, bool exact = true, std::string error = "") {
  return KernelRate{std::move(core), std::move(kernel), gflops, exact, std::move(error)};
}

TEST_CASE("the candidate kernels follow the CPU's extensions, widest first") {
  CpuFeatures none;
  CHECK(CandidateCoreTypes(none).empty());
  CpuFeatures avx;
  avx.avx = true;
  CHECK(CandidateCoreTypes(avx) == std::vector<std::string>{"Sandybridge"});
  CpuFeatures avx2 = avx;
  avx2.avx2 = true;
  CHECK(CandidateCoreTypes(avx2) == std::vector<std::string>{"Sandybridge"});  // Haswell's kernels need FMA too
  avx2.fma = true;
  CHECK(CandidateCoreTypes(avx2) == std::vector<std::string>{"Haswell", "Sandybridge"});
  CpuFeatures avx512 = avx2;
  avx512.avx512f = avx512.avx512bw = avx512.avx512dq = true;
  CHECK(CandidateCoreTypes(avx512) == std::vector<std::string>{"Haswell", "Sandybridge"});  // no VL: not SkylakeX
  avx512.avx512vl = true;
  CHECK(CandidateCoreTypes(avx512) == std::vector<std::string>{"SkylakeX", "Haswell", "Sandybridge"});
}

TEST_CASE("a product's sgemm sizes follow its transposition") {
  const ProductShape f{LinearProduct::kForward, 5, 7, 11}, i{LinearProduct::kInputGrad, 5, 7, 11},
      w{LinearProduct::kWeightGrad, 5, 7, 11};
  CHECK((std::vector<int>{f.m(), f.cols(), f.k()}) == std::vector<int>{5, 11, 7});
  CHECK((std::vector<int>{i.m(), i.cols(), i.k()}) == std::vector<int>{5, 7, 11});
  CHECK((std::vector<int>{w.m(), w.cols(), w.k()}) == std::vector<int>{11, 7, 5});
  for (const ProductShape& s : {f, i, w}) CHECK(s.flops() == 2.0 * 5 * 7 * 11);
  const auto block = GptBlockProducts(3, 4);
  REQUIRE(block.size() == 12);
  double flops = 0;
  for (const ProductShape& s : block) flops += s.flops();
  CHECK(flops == 2.0 * 3 * 3 * 12 * 4 * 4);  // 3 products x 12 c^2 weights per row
  CHECK(block[9].in == 16);
  CHECK(block[9].out == 4);  // the MLP's output projection, 4c -> c
}

TEST_CASE("product shapes print and parse back, and bad ones are refused with the form") {
  for (const ProductShape& s : GptBlockProducts(64, 128)) {
    auto back = ParseProductShape(FormatProductShape(s));
    REQUIRE(back.ok());
    CHECK(back->product == s.product);
    CHECK((std::vector<int>{back->n, back->in, back->out}) == std::vector<int>{s.n, s.in, s.out});
  }
  CHECK(FormatProductShape({LinearProduct::kWeightGrad, 1, 2, 3}) == "W:1:2:3");
  for (const char* bad : {"", "F", "F:1:2", "F:1:2:3:4", "X:1:2:3", "FF:1:2:3", "F:0:2:3", "F:-1:2:3", "F:1:2:65537",
                          "F:1: 2:3", "F:1:2:3 ", ":1:2:3", "F:1:2:", "F:1:2:3x", "F:1:2:\xc3\xa9"}) {
    auto parsed = ParseProductShape(bad);
    CHECK_MESSAGE(!parsed.ok(), bad);
    if (!parsed.ok()) CHECK(parsed.status().message().find("F|I|W:N:IN:OUT") != std::string::npos);
  }
  CHECK(ParseProductShape("I:65536:1:1").ok());
}

TEST_CASE("probe lines print and parse back; malformed ones are refused") {
  const KernelRate r = Rate("SkylakeX", "SkylakeX", 141.25, true);
  CHECK(FormatKernelRate(r) == "core_type=SkylakeX kernel=SkylakeX gflops=141.2 exact=1");
  auto back = ParseKernelRate(FormatKernelRate(r));
  REQUIRE(back.ok());
  CHECK(back->core_type == "SkylakeX");
  CHECK(back->kernel == "SkylakeX");
  CHECK(back->gflops == doctest::Approx(141.2));
  CHECK(back->exact);
  const KernelRate failed = Rate("Haswell", "", 0, false, "killed by signal 4: illegal = instruction");
  auto failed_back = ParseKernelRate("core_type=Haswell kernel=x gflops=0.0 exact=0 error=killed by signal 4: illegal = instruction");
  REQUIRE(failed_back.ok());
  CHECK(failed_back->error == failed.error);
  CHECK(!failed_back->exact);
  auto own = ParseKernelRate("core_type= kernel=Prescott gflops=27.3 exact=1");
  REQUIRE(own.ok());
  CHECK(own->core_type.empty());
  for (const char* bad : {"", "kernel=A gflops=1", "kernel=A exact=1", "gflops=1 exact=1", "kernel= gflops=1 exact=1",
                          "kernel=A gflops=x exact=1", "kernel=A gflops=-1 exact=1", "kernel=A gflops=1 exact=yes",
                          "kernel=A gflops=1 exact=1 speed=2", "kernel=A gflops=1 exact=1 junk"}) {
    CHECK_MESSAGE(!ParseKernelRate(bad).ok(), bad);
  }
}

TEST_CASE("kernels are ranked by the instruction set they are written for") {
  CHECK(KernelLevel("SkylakeX") == 3);
  CHECK(KernelLevel("Cooperlake") == 3);
  CHECK(KernelLevel("Haswell") == 2);
  CHECK(KernelLevel("Zen") == 2);
  CHECK(KernelLevel("Sandybridge") == 1);
  CHECK(KernelLevel("Prescott") == 0);
  CHECK(KernelLevel("Nehalem") == 0);
  for (const char* unknown : {"", "skylakex", "SkylakeX ", "Zen5", "oneDNN"}) CHECK(KernelLevel(unknown) == -1);
}

TEST_CASE("the rule moves to the CPU's widest kernels only from OpenBLAS's kernels for an older instruction set") {
  // The machine of 2026-11-28: a Sapphire Rapids Xeon that OpenBLAS 0.3.21 takes for a Prescott.
  auto chosen = ChooseKernel({Rate("", "Prescott", 27.3), Rate("SkylakeX", "SkylakeX", 131.1),
                              Rate("Haswell", "Haswell", 75.5), Rate("Sandybridge", "Sandybridge", 55.9)});
  REQUIRE(chosen.ok());
  CHECK(chosen->core_type == "SkylakeX");
  CHECK(chosen->kernel == "SkylakeX");
  CHECK(chosen->gflops == 131.1);
  CHECK(chosen->default_kernel == "Prescott");
  CHECK(chosen->default_gflops == 27.3);
  CHECK(chosen->measured.size() == 4);
  // The same under load that inverted the rates (seen: 3.5x): the widest still, so runs repeat.
  CHECK(ChooseKernel({Rate("", "Prescott", 27.3), Rate("SkylakeX", "SkylakeX", 17.9), Rate("Haswell", "Haswell", 63.3)})
            ->core_type == "SkylakeX");
  // A CPU OpenBLAS knows: its own kernels are kept even when a candidate timed faster.
  auto kept = ChooseKernel({Rate("", "Zen", 100), Rate("Haswell", "Haswell", 130), Rate("Sandybridge", "Sandybridge", 60)});
  REQUIRE(kept.ok());
  CHECK(kept->core_type.empty());
  CHECK(kept->kernel == "Zen");
  CHECK(kept->gflops == 100);
  CHECK(ChooseKernel({Rate("", "SkylakeX", 100), Rate("SkylakeX", "SkylakeX", 150)})->core_type.empty());
  // An AVX2 library choice on an AVX-512 CPU moves up; a name this table does not know stays.
  CHECK(ChooseKernel({Rate("", "Haswell", 100), Rate("SkylakeX", "SkylakeX", 90)})->core_type == "SkylakeX");
  CHECK(ChooseKernel({Rate("", "Zen5", 100), Rate("SkylakeX", "SkylakeX", 300)})->core_type.empty());
  // The guard: a candidate at less than half the own rate is wrong for this CPU; exactly half is not.
  CHECK(ChooseKernel({Rate("", "Prescott", 100), Rate("SkylakeX", "SkylakeX", 49.9)})->core_type.empty());
  CHECK(ChooseKernel({Rate("", "Prescott", 100), Rate("SkylakeX", "SkylakeX", 50)})->core_type == "SkylakeX");
  // The widest exact candidate is the one; inexact or failed ones are passed over, however fast.
  CHECK(ChooseKernel({Rate("", "Prescott", 20), Rate("SkylakeX", "S", 900, false), Rate("Haswell", "Haswell", 60)})
            ->core_type == "Haswell");
  CHECK(ChooseKernel({Rate("", "Prescott", 20), Rate("SkylakeX", "S", 900, true, "exit 1"),
                      Rate("Haswell", "Haswell", 60)})->core_type == "Haswell");
  CHECK(ChooseKernel({Rate("", "Prescott", 20), Rate("SkylakeX", "S", 900, false)})->core_type.empty());
  // OpenBLAS's own kernels alone: kept.
  CHECK(ChooseKernel({Rate("", "Prescott", 20)})->kernel == "Prescott");
}

TEST_CASE("an inexact own kernel is replaced by any exact one, and none exact is an error naming every kernel") {
  auto replaced = ChooseKernel({Rate("", "SkylakeX", 200, false), Rate("Haswell", "H", 10)});
  REQUIRE(replaced.ok());
  CHECK(replaced->core_type == "Haswell");
  auto failed = ChooseKernel({Rate("", "P", 200, false), Rate("Haswell", "H", 10, false), Rate("X", "", 0, false, "exit 1")});
  REQUIRE(!failed.ok());
  CHECK(failed.status().code() == StatusCode::kFailedPrecondition);
  for (const char* part : {"kernel=P", "kernel=H", "error=exit 1", "OPENBLAS_CORETYPE"}) {
    CHECK(failed.status().message().find(part) != std::string::npos);
  }
  CHECK(ChooseKernel({}).status().code() == StatusCode::kInternal);
  CHECK(ChooseKernel({Rate("Haswell", "H", 1)}).status().code() == StatusCode::kInternal);
}

TEST_CASE("the start-up line names the kernels, the rates and who decided") {
  auto chosen = ChooseKernel({Rate("", "Prescott", 27.3), Rate("SkylakeX", "SkylakeX", 131.1),
                              Rate("Haswell", "Haswell", 75.5), Rate("Sandybridge", "Sandybridge", 55.9, false)});
  REQUIRE(chosen.ok());
  CHECK(KernelChoiceLine(*chosen, "timed on this node") ==
        "sgemm: OpenBLAS SkylakeX kernels, 131.1 GFLOP/s on this model's products, chosen over OpenBLAS's own "
        "Prescott (27.3 GFLOP/s); also measured: Haswell 75.5, Sandybridge 55.9 (inexact) (timed on this node)");
  auto kept = ChooseKernel({Rate("", "Zen", 100.04), Rate("Haswell", "Haswell", 0, false, "exit 1")});
  REQUIRE(kept.ok());
  CHECK(KernelChoiceLine(*kept, "") ==
        "sgemm: OpenBLAS Zen kernels (OpenBLAS's own choice), 100.0 GFLOP/s on this model's products; also "
        "measured: Haswell failed");
}

TEST_CASE("this process's kernels compute the known products exactly and are timed") {
  CHECK(!OpenBlasKernelName().empty());
  CHECK(KnownProductsExact());
  const double rate = TimeProducts(LinearLayerProducts(64, 96, 80), std::chrono::milliseconds(5));
  CHECK(rate > 0.1);  // GFLOP/s: any CPU this runs on does more than 100 MFLOP/s
  CHECK(rate < 1e5);
}

TEST_CASE("RunProduct computes what LinearForward and LinearBackward compute") {
  constexpr int n = 9, in = 13, out = 7;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(n * in), w(out * in), y(n * out);
  for (auto* v : {&x, &w, &y}) {
    for (float& e : *v) e = u(rng);
  }
  std::vector<float> via_ops(n * out), via_probe(n * out);
  LinearForward(via_ops.data(), x.data(), w.data(), nullptr, n, in, out);
  RunProduct({LinearProduct::kForward, n, in, out}, x.data(), w.data(), y.data(), via_probe.data());
  CHECK(via_ops == via_probe);
  std::vector<float> dx(n * in, 0.0f), dw(out * in, 0.0f), dx_probe(n * in), dw_probe(out * in);
  LinearBackward(dx.data(), dw.data(), nullptr, y.data(), x.data(), w.data(), n, in, out);
  RunProduct({LinearProduct::kInputGrad, n, in, out}, x.data(), w.data(), y.data(), dx_probe.data());
  RunProduct({LinearProduct::kWeightGrad, n, in, out}, x.data(), w.data(), y.data(), dw_probe.data());
  CHECK(dx == dx_probe);
  CHECK(dw == dw_probe);
}

}  // namespace
}  // namespace dslaunch::runtime::ops
