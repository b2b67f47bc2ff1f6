// The CUDA layer kernels (runtime/ops/cuda/ops.h) at GPT-2 124M's shapes in bf16: ms per call and
// TFLOP/s for the matmul ops (linear, attention; attention counts the whole T x T square it
// computes), GB/s of the bytes each memory-bound op must move at least. cudaEvent timing on one
// stream, --warmup untimed calls first, the mean of --iters. After timing, every output is checked
// for inf/NaN (the inputs are small random numbers, so a non-finite value means a broken kernel).
// Built with the benchmarks and DSLAUNCH_WITH_CUDA; not registered with CTest. Without a usable
// GPU it says why and exits 1.
#include <CLI/CLI.hpp>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "runtime/core/random.h"
#include "runtime/core/sixteen_bit_float.h"
#include "runtime/ops/cuda/ops.h"

namespace {

namespace cuda = dslaunch::runtime::ops::cuda;
using bf16 = __nv_bfloat16;
using dslaunch::Status;
using dslaunch::runtime::DType;

// GPT-2 124M (llm.c's padded vocabulary: a multiple of 128 keeps the lm-head matmul aligned).
constexpr int kChannels = 768;
constexpr int kHeads = 12;
constexpr int kVocab = 50304;
constexpr long kParams = 124475904;  // llm.c's count for the padded vocabulary

struct Options {
  int batch = 8;
  int seq = 1024;
  int warmup = 3;
  int iters = 20;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "cuda_ops_bench: %s\n", what.c_str());
  std::exit(1);
}

void Check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) Die(std::string(what) + ": " + cudaGetErrorString(err));
}

void Check(const Status& status) {
  if (!status.ok()) Die(status.ToString());
}

// Device memory of n bf16 (or float) elements filled with uniform [-scale, scale) values (zeros
// for scale 0).
class Buffer {
 public:
  Buffer(DType dtype, long n, float scale, uint64_t seed) : dtype_(dtype), n_(n) {
    const size_t bytes = static_cast<size_t>(n) * dslaunch::runtime::DTypeSize(dtype);
    Check(cudaMalloc(&data_, bytes), "cudaMalloc");
    if (scale == 0.0f) {  // zeros: no host pass over (up to 400M) elements
      Check(cudaMemset(data_, 0, bytes), "cudaMemset");
      return;
    }
    std::vector<float> host(static_cast<size_t>(n));
    uint64_t s = seed;
    for (float& x : host) x = (2.0f * dslaunch::runtime::UniformFloat(s) - 1.0f) * scale;
    if (dtype == DType::kFloat32) {
      Check(cudaMemcpy(data_, host.data(), host.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    } else {
      std::vector<dslaunch::runtime::BFloat16> bits(host.size());
      dslaunch::runtime::FloatToBFloat16(host, bits);
      Check(cudaMemcpy(data_, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
    }
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { (void)cudaFree(data_); }
  bf16* h() const { return static_cast<bf16*>(data_); }
  float* f() const { return static_cast<float*>(data_); }
  void* get() const { return data_; }
  long size() const { return n_; }
  DType dtype() const { return dtype_; }

 private:
  DType dtype_;
  long n_;
  void* data_ = nullptr;
};

// Times `op` (enqueueing on `stream`): mean ms over opts.iters after opts.warmup calls.
double TimeMs(const Options& opts, cudaStream_t stream, const std::function<Status()>& op) {
  for (int i = 0; i < opts.warmup; ++i) Check(op());
  cudaEvent_t start, stop;
  Check(cudaEventCreate(&start), "cudaEventCreate");
  Check(cudaEventCreate(&stop), "cudaEventCreate");
  Check(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int i = 0; i < opts.iters; ++i) Check(op());
  Check(cudaEventRecord(stop, stream), "cudaEventRecord");
  Check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0.0f;
  Check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  return ms / opts.iters;
}

void Report(const char* name, double ms, double flops, double bytes) {
  std::printf("%-34s %9.3f ms", name, ms);
  if (flops > 0) std::printf("  %7.1f TFLOP/s", flops / (ms * 1e-3) / 1e12);
  if (bytes > 0) std::printf("  %7.1f GB/s", bytes / (ms * 1e-3) / 1e9);
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  CLI::App app{"cuda_ops_bench: the CUDA layer kernels at GPT-2 124M shapes (bf16)", "cuda_ops_bench"};
  app.add_option("--batch", opts.batch, "sequences per batch (B)")->check(CLI::PositiveNumber);
  app.add_option("--seq", opts.seq, "sequence length (T)")->check(CLI::PositiveNumber);
  app.add_option("--warmup", opts.warmup, "untimed calls before timing")->check(CLI::NonNegativeNumber);
  app.add_option("--iters", opts.iters, "timed calls (the mean is reported)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  int devices = 0;
  const cudaError_t probe = cudaGetDeviceCount(&devices);
  if (probe != cudaSuccess) Die(std::string("no usable GPU: cudaGetDeviceCount: ") + cudaGetErrorString(probe));
  if (devices == 0) Die("no usable GPU: cudaGetDeviceCount found no device");
  cudaDeviceProp prop{};
  Check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");

  const int b = opts.batch, t = opts.seq, c = kChannels, nh = kHeads, v = kVocab;
  const long n = static_cast<long>(b) * t;
  std::printf("cuda_ops_bench: %s, B=%d T=%d C=%d NH=%d V=%d, bf16, %d warm-up + %d timed calls\n", prop.name, b, t,
              c, nh, v, opts.warmup, opts.iters);

  dslaunch::Result<cuda::CublasLtContext> made = cuda::CublasLtContext::Create();
  if (!made.ok()) Die(made.status().ToString());
  cuda::CublasLtContext ctx = std::move(made).value();
  cudaStream_t stream;
  Check(cudaStreamCreate(&stream), "cudaStreamCreate");
  const auto H = DType::kBFloat16;

  // Activations and weights (scale 0.02, GPT-2's init; activations of size 1).
  Buffer x(H, n * c, 1.0f, 1), dx(H, n * c, 0.0f, 2), ln_out(H, n * c, 0.0f, 3), ln_w(H, c, 1.0f, 4),
      ln_b(H, c, 0.02f, 5);
  Buffer mean(DType::kFloat32, n, 0.0f, 6), rstd(DType::kFloat32, n, 0.0f, 7);
  Buffer w_qkv(H, 3L * c * c, 0.02f, 8), b_qkv(H, 3L * c, 0.02f, 9), qkv(H, n * 3 * c, 1.0f, 10),
      dqkv(H, n * 3 * c, 0.0f, 11);
  Buffer w_fc(H, 4L * c * c, 0.02f, 12), b_fc(H, 4L * c, 0.02f, 13), fc(H, n * 4 * c, 1.0f, 14),
      dfc(H, n * 4 * c, 0.0f, 15), gelu(H, n * 4 * c, 0.0f, 16);
  Buffer dw_fc(H, 4L * c * c, 0.0f, 17), db_fc(H, 4L * c, 0.0f, 18), dw_ln(H, c, 0.0f, 19), db_ln(H, c, 0.0f, 20);
  Buffer att(H, static_cast<long>(b) * nh * t * t, 0.0f, 21), att_out(H, n * c, 0.0f, 22),
      scratch(H, cuda::AttentionBackwardScratchElements(t, nh), 0.0f, 23);
  Buffer wte(H, static_cast<long>(v) * c, 0.02f, 24), logits(H, n * v, 1.0f, 25), probs(H, n * v, 0.0f, 26),
      dlogits(H, n * v, 0.0f, 27), losses(DType::kFloat32, n, 0.0f, 28);
  std::vector<int> host_targets(static_cast<size_t>(n));
  uint64_t s = 29;
  for (int& tg : host_targets) tg = static_cast<int>(dslaunch::runtime::SplitMix64(s) % v);
  int* targets = nullptr;
  Check(cudaMalloc(reinterpret_cast<void**>(&targets), host_targets.size() * sizeof(int)), "cudaMalloc");
  Check(cudaMemcpy(targets, host_targets.data(), host_targets.size() * sizeof(int), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  Buffer master(DType::kFloat32, kParams, 0.02f, 30), grads(DType::kFloat32, kParams, 1e-3f, 31),
      m(DType::kFloat32, kParams, 0.0f, 32), vv(DType::kFloat32, kParams, 0.0f, 33),
      copy(H, kParams, 0.0f, 34);

  const double lin = 2.0 * n * c;  // FLOPs per (input x output) channel pair of a linear forward
  const double attn = 2.0 * b * nh * static_cast<double>(t) * t * (c / nh);  // one T x T x hs product
  const double act = 2.0 * n * c;  // bytes of one [N][C] bf16 activation
  double ms;
  ms = TimeMs(opts, stream, [&] {
    return cuda::LinearForward<bf16>(ctx, qkv.h(), ln_out.h(), w_qkv.h(), b_qkv.h(), n, c, 3 * c, stream);
  });
  Report("linear fwd qkv (768->2304)", ms, lin * 3 * c, 0);
  ms = TimeMs(opts, stream, [&] {
    return cuda::LinearForward<bf16>(ctx, fc.h(), ln_out.h(), w_fc.h(), b_fc.h(), n, c, 4 * c, stream);
  });
  Report("linear fwd fc (768->3072)", ms, lin * 4 * c, 0);
  ms = TimeMs(opts, stream, [&] {
    return cuda::LinearBackward<bf16>(ctx, dx.h(), dw_fc.h(), db_fc.h(), dfc.h(), ln_out.h(), w_fc.h(), n, c, 4 * c,
                                      stream);
  });
  Report("linear bwd fc (768->3072)", ms, 2 * lin * 4 * c, 0);
  ms = TimeMs(opts, stream, [&] {
    return cuda::LinearForward<bf16>(ctx, logits.h(), ln_out.h(), wte.h(), nullptr, n, c, v, stream);
  });
  Report("linear fwd lm head (768->50304)", ms, lin * v, 0);
  ms = TimeMs(opts, stream, [&] {
    return cuda::AttentionForward<bf16>(ctx, att_out.h(), att.h(), qkv.h(), b, t, c, nh, stream);
  });
  Report("attention fwd", ms, 2 * attn, 2.0 * att.size() * 2);
  ms = TimeMs(opts, stream, [&] {
    return cuda::AttentionBackward<bf16>(ctx, dqkv.h(), scratch.h(), att_out.h(), qkv.h(), att.h(), b, t, c, nh,
                                         stream);
  });
  Report("attention bwd", ms, 4 * attn, 0);
  ms = TimeMs(opts, stream, [&] {
    return cuda::LayerNormForward<bf16>(ln_out.h(), mean.f(), rstd.f(), x.h(), ln_w.h(), ln_b.h(), n, c, stream);
  });
  Report("layernorm fwd", ms, 0, 2 * act);
  ms = TimeMs(opts, stream, [&] {
    return cuda::LayerNormBackward<bf16>(dx.h(), dw_ln.h(), db_ln.h(), att_out.h(), x.h(), ln_w.h(), mean.f(),
                                         rstd.f(), n, c, stream);
  });
  Report("layernorm bwd", ms, 0, 4 * act);
  ms = TimeMs(opts, stream, [&] { return cuda::GeluForward<bf16>(gelu.h(), fc.h(), n * 4 * c, stream); });
  Report("gelu fwd", ms, 0, 2 * 4 * act);
  ms = TimeMs(opts, stream, [&] { return cuda::GeluBackward<bf16>(dfc.h(), gelu.h(), fc.h(), n * 4 * c, stream); });
  Report("gelu bwd", ms, 0, 4 * 4 * act);
  ms = TimeMs(opts, stream, [&] {
    return cuda::CrossEntropyForward<bf16>(losses.f(), probs.h(), logits.h(), targets, n, v, stream);
  });
  Report("cross-entropy fwd", ms, 0, 2.0 * 2 * n * v);
  ms = TimeMs(opts, stream, [&] {
    return cuda::CrossEntropyBackward<bf16>(dlogits.h(), probs.h(), targets, 1.0f / n, n, v, stream);
  });
  Report("cross-entropy bwd", ms, 0, 3.0 * 2 * n * v);
  cuda::AdamParams hyper;
  hyper.lr = 1e-4;  // keeps the weights near their start however many calls run
  ms = TimeMs(opts, stream, [&] {
    return cuda::AdamUpdate(hyper, master.f(), grads.f(), m.f(), vv.f(), kParams, true, copy.get(),
                            DType::kBFloat16, stream);
  });
  Report("adamw (124M params, bf16 copy)", ms, 0, 18.0 * kParams);  // read p g m v, write p m v, copy

  // Every output finite?
  int* flag = nullptr;
  Check(cudaMalloc(reinterpret_cast<void**>(&flag), sizeof(int)), "cudaMalloc");
  Check(cudaMemsetAsync(flag, 0, sizeof(int), stream), "cudaMemsetAsync");
  for (const Buffer* out : {&qkv, &fc, &dx, &dw_fc, &db_fc, &logits, &att_out, &att, &dqkv, &ln_out, &gelu, &dfc,
                            &probs, &dlogits, &losses, &master, &copy, &mean, &rstd}) {
    Check(cuda::HasInfOrNaN(out->get(), out->size(), out->dtype(), flag, stream));
  }
  int bad = 0;
  Check(cudaMemcpyAsync(&bad, flag, sizeof(int), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
  Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  if (bad != 0) Die("an output holds inf or NaN: a kernel is broken");
  std::printf("cuda_ops_bench: all outputs finite\n");
  (void)cudaFree(flag);
  (void)cudaFree(targets);
  (void)cudaStreamDestroy(stream);
  return 0;
}
