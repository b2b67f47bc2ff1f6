// gpt_cuda_bench: GPT-2 124M training steps on one GPU (runtime/models/cuda/gpt.h), bf16, on
// synthetic random tokens (docs/gpu.md). The kernels alone at these shapes: cuda_ops_bench.
//
//   gpt_cuda_bench [--batch 8] [--seq 1024] [--warmup 3] [--steps 10] [--peak_tflops P]
//                  [--seed 1]
//
// The model: 12 layers, 12 heads, 768 wide, block 1024, the vocabulary of 50257 tokens padded to
// 50304 rows (a multiple of 64 for the matmuls; the 47 extra rows are never a token or a target).
// Parameters and activations in bf16; fp32 master weights, gradients and AdamW moments, the
// update by the AdamUpdate op (which writes the bf16 copy). Initialisation: GptModel's (GPT-2's).
// Each step (warm-up and timed alike) runs its own batch of random tokens, uploaded beforehand:
// zero gradients, Forward, Backward, gradients to fp32, AdamW tensor by tensor. The timed steps
// are measured with CUDA events around all of them.
//
// Prints the device, tokens/s, ms/step, model FLOPs per token (GptModel::FlopsPerToken: 6 x matmul
// parameters + 12 n_layer T C for attention), the achieved TFLOP/s and the MFU against a dense
// bf16 peak (--peak_tflops, else from the device name: H100 SXM and H200 989, H100 PCIe 756, A100
// 312), and the loss: on random tokens it starts near log(50257) = 10.82 (+0.15 from the spread of
// the initial logits) and stays near it. Checks: the first loss within kStartLossSlack of
// log(50257), the last one finite; otherwise exit 1 (after printing the figures).
// The last line is a summary for grep:
//   gpt_cuda_bench: device="..." batch=8 seq=1024 ms_per_step=... tokens_per_s=... tflops=... mfu=... loss=...
// Exit codes: 0 success, 1 no GPU or a failed call or check (the message says which), 2 bad flags.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "runtime/core/random.h"
#include "runtime/models/cuda/gpt.h"
#include "runtime/models/gpt.h"
#include "runtime/ops/cuda/cuda_status.h"
#include "runtime/ops/cuda/ops.h"

namespace {

using dslaunch::Result;
using dslaunch::Status;
using dslaunch::runtime::GptConfig;
using dslaunch::runtime::FlatDeviceParameters;
using dslaunch::runtime::GptCuda;
using dslaunch::runtime::GptModel;
namespace cu = dslaunch::runtime::ops::cuda;
using Bf16 = __nv_bfloat16;

// GPT-2 small (124M).
constexpr int kLayers = 12, kHeads = 12, kWidth = 768, kBlock = 1024;
constexpr int kVocab = 50257;        // GPT-2's tokenizer
constexpr int kPaddedVocab = 50304;  // rounded up to a multiple of 64 (llm.c's choice): aligned matmuls
// AdamW as GPT-2 small is usually trained (lr 6e-4, betas 0.9/0.95, weight decay 0.1).
constexpr double kLearningRate = 6e-4, kBeta2 = 0.95, kWeightDecay = 0.1;
// An untrained model's loss is log(vocabulary) plus about s^2/2 for logits of spread s at
// initialisation (s = 0.02 sqrt(768) = 0.55 here: +0.15, so ~10.98); a nat more means the forward
// pass is wrong.
constexpr double kStartLossSlack = 1.0;

struct Flags {
  int batch = 8;
  int seq = kBlock;
  int warmup = 3;
  int steps = 10;
  double peak_tflops = 0;  // 0: from the device name
  uint64_t seed = 1;
};

// Dense bf16 tensor-core peak (TFLOP/s, without sparsity) for the device's name, and which
// product it took it for; 0 when the name is not known.
std::pair<double, std::string> PeakFromName(const std::string& name) {
  if (name.find("H100") != std::string::npos && name.find("PCIe") != std::string::npos) return {756, "H100 PCIe"};
  if (name.find("H100") != std::string::npos) return {989, "H100 SXM"};
  if (name.find("H200") != std::string::npos) return {989, "H200"};
  if (name.find("A100") != std::string::npos) return {312, "A100"};
  return {0, ""};
}

int Fail(const Status& s) {
  std::fprintf(stderr, "gpt_cuda_bench: %s\n", s.ToString().c_str());
  return 1;
}

// Device memory freed at scope exit; Allocate names the buffer in its error.
class DeviceMemory {
 public:
  ~DeviceMemory() {
    for (void* p : blocks_) (void)cudaFree(p);
  }
  template <typename U>
  Status Allocate(U** out, size_t count, const char* name) {
    void* p = nullptr;
    const Status s = cu::CudaStatus(cudaMalloc(&p, count * sizeof(U)), "cudaMalloc", name);
    if (!s.ok()) return s;
    blocks_.push_back(p);
    *out = static_cast<U*>(p);
    return Status::Ok();
  }

 private:
  std::vector<void*> blocks_;
};

// The training state of one GPU: bf16 parameters and gradients for the model, fp32 master
// weights, gradients and moments for AdamW.
struct Training {
  GptCuda<Bf16>* model = nullptr;
  size_t numel = 0;
  Bf16 *params = nullptr, *grads = nullptr;
  float *master = nullptr, *grads_f32 = nullptr, *m = nullptr, *v = nullptr;
  int64_t updates = 0;

  // One step on batch (tokens, targets) of b x t: forward, backward, AdamW.
  Status Step(const int* tokens, const int* targets, int b, int t, cudaStream_t stream) {
    DSLAUNCH_RETURN_IF_ERROR(
        cu::CudaStatus(cudaMemsetAsync(grads, 0, numel * sizeof(Bf16), stream), "Step", "cudaMemsetAsync grads"));
    FlatDeviceParameters<Bf16> flat(model->layout(), params, grads);
    DSLAUNCH_RETURN_IF_ERROR(model->Forward(flat, tokens, targets, b, t, stream));
    DSLAUNCH_RETURN_IF_ERROR(model->Backward(flat, 1.0f, stream));
    DSLAUNCH_RETURN_IF_ERROR(cu::Float16To32(grads_f32, grads, dslaunch::runtime::DType::kBFloat16, static_cast<long>(numel), stream));
    cu::AdamParams adam;
    adam.decoupled = true;
    adam.lr = kLearningRate;
    adam.beta2 = kBeta2;
    adam.weight_decay = kWeightDecay;
    adam.step = ++updates;
    for (const auto& group : model->layout().groups()) {
      for (const auto& tensor : group.tensors) {
        const size_t o = tensor.offset;
        DSLAUNCH_RETURN_IF_ERROR(cu::AdamUpdate(adam, master + o, grads_f32 + o, m + o, v + o,
                                                static_cast<long>(tensor.numel), tensor.decay, params + o,
                                                dslaunch::runtime::DType::kBFloat16, stream));
      }
    }
    return Status::Ok();
  }
};

double GiB(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

int Run(const Flags& flags) {
  int devices = 0;
  const cudaError_t count_rc = cudaGetDeviceCount(&devices);
  if (count_rc != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "gpt_cuda_bench: no CUDA device (cudaGetDeviceCount: %s); this benchmark needs a GPU\n",
                 count_rc != cudaSuccess ? cudaGetErrorString(count_rc) : "0 devices");
    return 1;
  }
  cudaDeviceProp prop{};
  if (Status s = cu::CudaStatus(cudaGetDeviceProperties(&prop, 0), "main", "cudaGetDeviceProperties"); !s.ok()) {
    return Fail(s);
  }
  const std::string device = prop.name;
  auto [peak, peak_source] = PeakFromName(device);
  if (flags.peak_tflops > 0) peak = flags.peak_tflops, peak_source = "--peak_tflops";
  std::printf("device: %s (sm_%d%d, %.1f GiB)\n", device.c_str(), prop.major, prop.minor, GiB(prop.totalGlobalMem));
  if (peak > 0) {
    std::printf("peak: %.0f TFLOP/s dense bf16 (%s%s)\n", peak, peak_source.c_str(),
                peak_source == "--peak_tflops" ? "" : ", from the device name; --peak_tflops overrides");
  } else {
    std::printf("peak: unknown for this device name; pass --peak_tflops for an MFU\n");
  }

  GptConfig config;
  config.n_layer = kLayers;
  config.n_head = kHeads;
  config.n_embd = kWidth;
  config.block_size = kBlock;
  config.vocab_size = kPaddedVocab;
  const int b = flags.batch, t = flags.seq, n = b * t;

  cudaStream_t stream = nullptr;
  if (Status s = cu::CudaStatus(cudaStreamCreate(&stream), "main", "cudaStreamCreate"); !s.ok()) return Fail(s);
  auto ctx = cu::CublasLtContext::Create();
  if (!ctx.ok()) return Fail(ctx.status());
  size_t free_before = 0, total = 0;
  (void)cudaMemGetInfo(&free_before, &total);
  auto created = GptCuda<Bf16>::Create(config, b, *ctx);
  if (!created.ok()) return Fail(created.status());
  GptCuda<Bf16>& model = **created;

  // Parameters: GPT-2's initialisation on the host (GptModel's), then fp32 master and bf16 copy.
  Training train;
  train.model = &model;
  train.numel = model.layout().numel();
  DeviceMemory mem;
  int *tokens = nullptr, *targets = nullptr;
  const int batches = flags.warmup + flags.steps;
  const size_t batch_tokens = static_cast<size_t>(n);
  for (Status s : {mem.Allocate(&train.params, train.numel, "bf16 parameters"),
                   mem.Allocate(&train.grads, train.numel, "bf16 gradients"),
                   mem.Allocate(&train.master, train.numel, "fp32 master weights"),
                   mem.Allocate(&train.grads_f32, train.numel, "fp32 gradients"),
                   mem.Allocate(&train.m, train.numel, "AdamW m"), mem.Allocate(&train.v, train.numel, "AdamW v"),
                   mem.Allocate(&tokens, batches * batch_tokens, "tokens"),
                   mem.Allocate(&targets, batches * batch_tokens, "targets")}) {
    if (!s.ok()) return Fail(s);
  }
  {
    std::vector<float> init(train.numel);
    GptModel(config, 0).InitParameters(init, flags.seed);
    // Random token streams: targets are the next token, as a data loader would give them.
    std::vector<int> host_tokens(batches * batch_tokens), host_targets(batches * batch_tokens);
    uint64_t state = flags.seed ^ 0x5eedULL;
    for (size_t row = 0; row < static_cast<size_t>(batches) * b; ++row) {
      int next = static_cast<int>(dslaunch::runtime::SplitMix64(state) % kVocab);
      for (int i = 0; i < t; ++i) {
        host_tokens[row * t + i] = next;
        next = static_cast<int>(dslaunch::runtime::SplitMix64(state) % kVocab);
        host_targets[row * t + i] = next;
      }
    }
    for (Status s :
         {cu::CudaStatus(cudaMemcpy(train.master, init.data(), train.numel * sizeof(float), cudaMemcpyHostToDevice),
                         "main", "cudaMemcpy parameters"),
          cu::CudaStatus(cudaMemcpy(tokens, host_tokens.data(), host_tokens.size() * sizeof(int),
                                    cudaMemcpyHostToDevice),
                         "main", "cudaMemcpy tokens"),
          cu::CudaStatus(cudaMemcpy(targets, host_targets.data(), host_targets.size() * sizeof(int),
                                    cudaMemcpyHostToDevice),
                         "main", "cudaMemcpy targets"),
          cu::CudaStatus(cudaMemsetAsync(train.m, 0, train.numel * sizeof(float), stream), "main", "cudaMemsetAsync m"),
          cu::CudaStatus(cudaMemsetAsync(train.v, 0, train.numel * sizeof(float), stream), "main", "cudaMemsetAsync v"),
          cu::FloatTo16(train.params, dslaunch::runtime::DType::kBFloat16, train.master, static_cast<long>(train.numel), stream)}) {
      if (!s.ok()) return Fail(s);
    }
  }
  size_t free_after = 0;
  (void)cudaMemGetInfo(&free_after, &total);
  const double state_bytes = static_cast<double>(train.numel) * (2 + 2 + 4 + 4 + 4 + 4);
  std::printf(
      "model: GPT-2 124M: %d layers, %d heads, %d wide, block %d, vocabulary %d padded to %d; %zu parameters\n"
      "  bf16 parameters, gradients and activations; fp32 master weights, gradients and AdamW moments\n",
      kLayers, kHeads, kWidth, kBlock, kVocab, kPaddedVocab, train.numel);
  std::printf("memory: %.2f GiB on the device: activations %.2f GiB, parameters + gradients + optimizer %.2f GiB\n",
              GiB(static_cast<double>(free_before) - static_cast<double>(free_after)), GiB(model.activation_bytes()),
              GiB(state_bytes));

  // Warm-up: the first step's loss is the untrained model's.
  float first_loss = NAN;
  for (int i = 0; i < flags.warmup; ++i) {
    const size_t o = static_cast<size_t>(i) * batch_tokens;
    if (Status s = train.Step(tokens + o, targets + o, b, t, stream); !s.ok()) return Fail(s);
    if (i == 0) {
      Result<float> loss = model.MeanLoss(stream);
      if (!loss.ok()) return Fail(loss.status());
      first_loss = *loss;
    }
  }
  if (Status s = cu::CudaStatus(cudaStreamSynchronize(stream), "warm-up", "cudaStreamSynchronize"); !s.ok()) {
    return Fail(s);
  }

  cudaEvent_t start = nullptr, stop = nullptr;
  if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) {
    return Fail(dslaunch::InternalError("cudaEventCreate failed"));
  }
  (void)cudaEventRecord(start, stream);
  for (int i = 0; i < flags.steps; ++i) {
    const size_t o = static_cast<size_t>(flags.warmup + i) * batch_tokens;
    if (Status s = train.Step(tokens + o, targets + o, b, t, stream); !s.ok()) return Fail(s);
  }
  (void)cudaEventRecord(stop, stream);
  if (Status s = cu::CudaStatus(cudaEventSynchronize(stop), "timed steps", "cudaEventSynchronize"); !s.ok()) {
    return Fail(s);
  }
  float total_ms = 0;
  (void)cudaEventElapsedTime(&total_ms, start, stop);
  Result<float> last = model.MeanLoss(stream);
  if (!last.ok()) return Fail(last.status());

  const double ms_per_step = total_ms / flags.steps;
  const double tokens_per_s = n / (ms_per_step * 1e-3);
  const double flops_per_token = model.FlopsPerToken(t);
  const double tflops = flops_per_token * tokens_per_s / 1e12;
  const double mfu = peak > 0 ? tflops / peak : NAN;
  std::printf("steps: batch %d x %d = %d tokens; %d warm-up + %d timed steps of forward + backward + AdamW\n", b, t,
              n, flags.warmup, flags.steps);
  std::printf("loss: first %.4f (log %d = %.4f), last %.4f\n", first_loss, kVocab, std::log(kVocab), *last);
  std::printf("ms/step: %.2f\ntokens/s: %.0f\nmodel FLOPs/token: %.4g (6 x matmul parameters + 12 L T C)\n",
              ms_per_step, tokens_per_s, flops_per_token);
  std::printf("achieved: %.1f TFLOP/s\n", tflops);
  if (peak > 0) std::printf("MFU: %.1f%% of %.0f TFLOP/s\n", 100 * mfu, peak);

  int rc = 0;
  if (!std::isfinite(first_loss) || std::abs(first_loss - std::log(kVocab)) > kStartLossSlack) {
    std::fprintf(stderr, "gpt_cuda_bench: the untrained loss %.4f is not within %.1f of log(%d) = %.4f\n",
                 first_loss, kStartLossSlack, kVocab, std::log(kVocab));
    rc = 1;
  }
  if (!std::isfinite(*last)) {
    std::fprintf(stderr, "gpt_cuda_bench: the last loss is not finite (%f)\n", *last);
    rc = 1;
  }
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  (void)cudaStreamDestroy(stream);
  std::printf("gpt_cuda_bench: device=\"%s\" batch=%d seq=%d ms_per_step=%.2f tokens_per_s=%.0f tflops=%.1f ",
              device.c_str(), b, t, ms_per_step, tokens_per_s, tflops);
  if (peak > 0) {
    std::printf("mfu=%.3f ", mfu);
  } else {
    std::printf("mfu=n/a ");
  }
  std::printf("loss=%.4f\n", *last);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app{"GPT-2 124M training steps on one GPU in bf16: tokens/s and MFU"};
  app.add_option("--batch", flags.batch, "sequences per step")->check(CLI::Range(1, 1024));
  app.add_option("--seq", flags.seq, "tokens per sequence (at most the block, 1024)")->check(CLI::Range(1, kBlock));
  app.add_option("--warmup", flags.warmup, "untimed steps first (at least 1: its loss is checked)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--steps", flags.steps, "timed steps")->check(CLI::Range(1, 100000));
  app.add_option("--peak_tflops", flags.peak_tflops,
                 "dense bf16 peak for the MFU (default from the device name: H100 SXM/H200 989, H100 PCIe 756, "
                 "A100 312)")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", flags.seed, "initialisation and token seed");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return Run(flags);
}
