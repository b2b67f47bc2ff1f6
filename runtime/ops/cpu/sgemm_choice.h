// Which OpenBLAS kernels run the bundled runtime's matrix products: the candidates a CPU supports,
// the shapes they are timed on, and the rule that picks one from the measured rates. Pure apart
// from ReadCpuFeatures (cpuid); the timing is runtime/ops/cpu/sgemm_probe.h, the node's choice
// and its hand-over to the workers runtime/train/kernel_choice.h (docs/engine.md, "Matrix kernels").
//
// Why: Debian's OpenBLAS is built for every x86-64 core (DYNAMIC_ARCH) and picks its kernels from
// the CPU's model number. A CPU newer than the library (0.3.21 on a Sapphire Rapids Xeon) gets the
// oldest kernels (Prescott, SSE3): 4-5x slower than the AVX-512 ones the CPU runs. The variable
// OPENBLAS_CORETYPE, read when the library loads, names the kernels to use instead.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dslaunch::runtime::ops {

// The instruction-set extensions OpenBLAS's x86-64 kernels need (as the operating system enables
// them: AVX-512 state saved by XSAVE).
struct CpuFeatures {
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512dq = false;
  bool avx512vl = false;
};

// This CPU's, through the compiler's cpuid builtins (which check the OS support too).
CpuFeatures ReadCpuFeatures();

// The OPENBLAS_CORETYPE values worth timing on a CPU with these features, widest vectors first
// (the order of preference between kernels of about the same speed): "SkylakeX" (AVX-512 F, BW,
// DQ, VL), "Haswell" (AVX2 and FMA), "Sandybridge" (AVX). Empty for a CPU without AVX.
std::vector<std::string> CandidateCoreTypes(const CpuFeatures& cpu);

// One sgemm call of LinearForward/LinearBackward (runtime/ops/cpu/ops.h) on an n x in -> n x out
// layer: y = x W^T (kForward), dx = dy W (kInputGrad), dW = dy^T x (kWeightGrad).
enum class LinearProduct { kForward, kInputGrad, kWeightGrad };
struct ProductShape {
  LinearProduct product = LinearProduct::kForward;
  int n = 0, in = 0, out = 0;
  // sgemm's M, N, K and the product's floating-point operations (2 M N K).
  int m() const;
  int cols() const;
  int k() const;
  double flops() const;
};

// The three products of one linear layer's forward and backward.
std::vector<ProductShape> LinearLayerProducts(int n, int in, int out);
// A GPT block's four linear layers (qkv, attention output, MLP, MLP output) for n token rows of
// width c: twelve products.
std::vector<ProductShape> GptBlockProducts(int n, int c);

// "F:256:512:1536" (kForward, n 256, in 512, out 1536); I for kInputGrad, W for kWeightGrad. The
// probe's command line carries its shapes in this form.
std::string FormatProductShape(const ProductShape& s);
// kInvalidArgument naming the text unless it is FormatProductShape's form with sizes in
// [1, kMaxProbeSize].
Result<ProductShape> ParseProductShape(std::string_view text);
inline constexpr int kMaxProbeSize = 1 << 16;

// One kernel's result on this node: `core_type` is the OPENBLAS_CORETYPE it ran with ("" for
// OpenBLAS's own choice), `kernel` the core name the library reported, `gflops` its rate on the
// model's products, `exact` whether it computed the known product exactly; `error` a probe that
// failed (it did not start, crashed, printed nothing usable), when not empty.
struct KernelRate {
  std::string core_type;
  std::string kernel;
  double gflops = 0;
  bool exact = false;
  std::string error;
};

// The instruction set a kernel of OpenBLAS 0.3.21 is written for, from the core name it reports:
// 3 AVX-512 (SkylakeX, Cooperlake, SapphireRapids), 2 AVX2 (Haswell, Zen), 1 AVX (Sandybridge,
// Bulldozer, Piledriver, Steamroller, Excavator), 0 older (Prescott, Core2, Nehalem, Atom,
// Barcelona, ...); -1 for a name not in this list (a library newer than this table).
int KernelLevel(std::string_view kernel);

// A candidate replaces OpenBLAS's own kernels only if it measured at least this fraction of their
// rate: a guard against a kernel that is wrong for the CPU, not a contest (see ChooseKernel).
inline constexpr double kMinRateOfOwn = 0.5;

// What the node runs: `core_type` to set as OPENBLAS_CORETYPE ("" to leave OpenBLAS's own choice),
// the kernel's name and rate, and the default's for the start-up line.
struct KernelChoice {
  std::string core_type;
  std::string kernel;
  double gflops = 0;
  std::string default_kernel;
  double default_gflops = 0;
  std::vector<KernelRate> measured;  // as given to ChooseKernel
};

// The rule, on `measured` whose first entry is OpenBLAS's own choice (core_type ""), the others
// in CandidateCoreTypes' order (widest first): take the first other entry that is exact and has
// no error; use it when OpenBLAS's own kernels are for an older instruction set (KernelLevel lower,
// not unknown) and it measured at least kMinRateOfOwn of their rate, or when OpenBLAS's own are not
// exact. Otherwise keep OpenBLAS's own. The rates only guard: the choice is the same on every run
// on one machine (timing noise under load reached 3.5x here), so that runs and resumes repeat bit
// for bit, and a kernel for the CPU's widest vectors was the fastest on every machine measured
// (docs/engine.md, "Matrix kernels").
// kInternal when `measured` is empty or its first entry is not the default; kFailedPrecondition,
// with every kernel's result, when no kernel (the default included) computed the known product
// exactly: the library is broken, training would be wrong.
Result<KernelChoice> ChooseKernel(const std::vector<KernelRate>& measured);

// A KernelRate as one line of text ("core_type=SkylakeX kernel=SkylakeX gflops=141.2 exact=1",
// plus " error=..." to the end of the line when there is one), and back: the probe's output and
// the node's choice file are made of such lines. kInvalidArgument for a line without kernel=,
// gflops= and exact=, or with values that do not parse.
std::string FormatKernelRate(const KernelRate& rate);
Result<KernelRate> ParseKernelRate(std::string_view line);

// The start-up line: "sgemm: OpenBLAS SkylakeX kernels, 141.2 GFLOP/s on this model's products,
// chosen over OpenBLAS's own Prescott (29.1 GFLOP/s); also measured: Haswell 98.3" or, kept,
// "sgemm: OpenBLAS Cooperlake kernels (OpenBLAS's own choice), 190.2 GFLOP/s on this model's
// products; also measured: ...". `source` is appended in parentheses when not empty.
std::string KernelChoiceLine(const KernelChoice& choice, std::string_view source);

}  // namespace dslaunch::runtime::ops
