// GptCuda (runtime/models/cuda/gpt.h) against its CPU twin GptModel: the same initial parameters
// (GptModel::InitParameters), the same tokens; the forward loss and every parameter's gradient in
// fp32, then ten AdamW steps on both sides (CPU: OptimizerUpdate on the flat fp32 buffer; device:
// fp32 master weights and the AdamUpdate op writing the T copy) with the per-step losses compared,
// in fp32 and in bf16.
#include "runtime/models/cuda/gpt.h"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/core/random.h"
#include "runtime/engine/optimizer.h"
#include "runtime/models/gpt.h"
#include "runtime/ops/cuda/ops.h"
#include "tests/fakes/flat_parameter_access.h"
#include "tests/support/device_array.h"
#include "tests/support/gpu_device.h"

namespace dslaunch::runtime {
namespace {

using dslaunch::testing::DeviceArray;

namespace cu = ops::cuda;

// A small GPT whose sizes are not all powers of two: 2 layers, 4 heads of 16, C 64, block 32,
// vocabulary 96 (the CPU reference takes well under a second).
GptConfig SmallConfig() {
  GptConfig config;
  config.n_layer = 2;
  config.n_head = 4;
  config.n_embd = 64;
  config.block_size = 32;
  config.vocab_size = 96;
  return config;
}
constexpr uint64_t kInitSeed = 20240611;
// The gradient check's batch: 3 sequences of 29 tokens, shorter than the block, so that the
// position embeddings past t get no gradient and no shape is a multiple of 8.
constexpr int kGradBatch = 3, kGradSeq = 29;
// The training check's batch: 4 full-block sequences, the same batch every step (the loss must
// fall, which shows the steps do something).
constexpr int kTrainBatch = 4, kTrainSeq = 32;
constexpr int kTrainSteps = 10;
constexpr double kLearningRate = 1e-3;
constexpr double kWeightDecay = 0.1;

// Tolerances. fp32: cuBLASLt (no TF32) and OpenBLAS sum in different orders, and the device's
// expf/tanhf differ from the CPU's SimdExp by an ulp or two, so values agree to ~1e-6 relative;
// the bounds are 100x that and far below what any wrong formula, index or missing term gives
// (errors of 1e-2 relative and more).
// The mean loss at initialisation (~log 96 = 4.56): |GPU - CPU|.
constexpr double kLossToleranceF32 = 1e-4;
// Each parameter tensor's gradient: max |GPU - CPU| <= this x max |CPU| over the tensor (relative
// to the tensor's scale, since entries near zero carry only rounding noise: e.g. the key bias,
// whose true gradient is 0).
constexpr double kGradToleranceF32 = 1e-3;
// Each step's loss over ten AdamW steps in fp32. Adam divides by sqrt(v), so an element whose
// gradient is at noise level moves by up to lr either way, differently on each side; such elements
// have no first-order effect on the loss, which stays within ~1e-5.
constexpr double kTrainToleranceF32 = 1e-3;
// Each step's loss in bf16 (8 significant bits: rounding 2^-9 = 0.2% relative) against the fp32
// CPU. A CPU emulation of this run (GptModel's ops with every output, gradient and weight copy
// rounded to bf16 as the device does, fp32 master weights) stays within 0.0015 of the fp32 losses
// over the ten steps (4.58 -> 3.50); the device also rounds the attention scores before the
// softmax, which the emulation does not. 0.02 (0.5% of the loss) is 13x the emulated difference
// and far below a wrong step (each step here lowers the loss by 0.06 to 0.3).
constexpr double kTrainToleranceBf16 = 0.02;

void RequireOk(const Status& s) { REQUIRE_MESSAGE(s.ok(), s.ToString()); }

template <typename T>
constexpr DType kDType = std::is_same_v<T, float> ? DType::kFloat32 : DType::kBFloat16;

struct Batch {
  int b = 0, t = 0;
  std::vector<int> tokens, targets;
};

Batch RandomBatch(int b, int t, int vocab, uint64_t seed) {
  Batch batch{b, t, std::vector<int>(b * t), std::vector<int>(b * t)};
  uint64_t state = seed;
  for (int& x : batch.tokens) x = static_cast<int>(SplitMix64(state) % vocab);
  for (int& x : batch.targets) x = static_cast<int>(SplitMix64(state) % vocab);
  return batch;
}

std::vector<float> InitialParameters(const GptConfig& config) {
  GptModel model(config, 1);
  std::vector<float> params(model.layout().numel());
  model.InitParameters(params, kInitSeed);
  return params;
}

// `master` (fp32) into `copy` (T): a copy for fp32, the FloatTo16 op's rounding for bf16.
template <typename T>
void MakeCopy(const DeviceArray<float>& master, DeviceArray<T>& copy) {
  if constexpr (std::is_same_v<T, float>) {
    REQUIRE(cudaMemcpy(copy.data(), master.data(), master.count() * sizeof(float), cudaMemcpyDeviceToDevice) ==
            cudaSuccess);
  } else {
    RequireOk(cu::FloatTo16(copy.data(), kDType<T>, master.data(), static_cast<long>(master.count()), nullptr));
  }
}

// The device model with its cuBLASLt context, and the batch on the device.
template <typename T>
struct DeviceRun {
  DeviceRun(const GptConfig& config, const Batch& batch) : tokens(batch.tokens.size()), targets(batch.targets.size()) {
    auto created_ctx = cu::CublasLtContext::Create();
    RequireOk(created_ctx.status());
    ctx = std::make_unique<cu::CublasLtContext>(std::move(created_ctx).value());
    auto created = GptCuda<T>::Create(config, batch.b, *ctx);
    RequireOk(created.status());
    model = std::move(created).value();
    tokens.Put(batch.tokens);
    targets.Put(batch.targets);
  }
  std::unique_ptr<cu::CublasLtContext> ctx;
  std::unique_ptr<GptCuda<T>> model;
  DeviceArray<int> tokens, targets;
};

TEST_CASE("GptCuda<float> gives GptModel's loss and every parameter's gradient within fp32 rounding") {
  DSLAUNCH_REQUIRE_GPU();
  const GptConfig config = SmallConfig();
  const Batch batch = RandomBatch(kGradBatch, kGradSeq, config.vocab_size, 7);
  std::vector<float> params = InitialParameters(config);
  const size_t numel = params.size();

  GptModel cpu(config, batch.b);
  std::vector<float> cpu_grads(numel, 0.0f);
  dslaunch::testing::FlatParameterAccess access(cpu.layout(), params, cpu_grads);
  const float cpu_loss = cpu.Forward(access, batch.tokens.data(), batch.targets.data(), batch.b, batch.t);
  cpu.Backward(access, 1.0f);

  DeviceRun<float> run(config, batch);
  DeviceArray<float> d_params(numel), d_grads(numel);
  d_params.Put(params);
  d_grads.Zero();
  FlatDeviceParameters<float> flat(run.model->layout(), d_params.data(), d_grads.data());
  RequireOk(run.model->Forward(flat, run.tokens.data(), run.targets.data(), batch.b, batch.t, nullptr));
  Result<float> gpu_loss = run.model->MeanLoss(nullptr);
  RequireOk(gpu_loss.status());
  RequireOk(run.model->Backward(flat, 1.0f, nullptr));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::vector<float> gpu_grads = d_grads.Get();

  MESSAGE("loss cpu=" << cpu_loss << " gpu=" << *gpu_loss);
  CHECK(std::isfinite(*gpu_loss));
  CHECK(std::abs(*gpu_loss - cpu_loss) <= kLossToleranceF32);
  double worst = 0;  // the largest error / (tolerance x scale) over the tensors, for the log
  std::string worst_name;
  for (const auto& group : cpu.layout().groups()) {
    for (const auto& tensor : group.tensors) {
      double max_ref = 0, max_err = 0;
      for (size_t i = tensor.offset; i < tensor.offset + tensor.numel; ++i) {
        max_ref = std::max(max_ref, std::abs(static_cast<double>(cpu_grads[i])));
        max_err = std::max(max_err, std::abs(static_cast<double>(gpu_grads[i]) - cpu_grads[i]));
      }
      CAPTURE(tensor.name);
      CAPTURE(max_ref);
      CAPTURE(max_err);
      CHECK(std::isfinite(max_err));
      CHECK(max_ref > 0);  // every tensor of this batch has a gradient (a zero one would test nothing)
      CHECK(max_err <= kGradToleranceF32 * max_ref);
      const double ratio = max_err / (kGradToleranceF32 * max_ref);
      if (ratio > worst) worst = ratio, worst_name = tensor.name;
    }
  }
  MESSAGE("worst gradient: " << worst_name << " at " << worst << " of its tolerance");
}

TEST_CASE("GptCuda::Backward accumulates into the gradients and scales them by the loss scale") {
  DSLAUNCH_REQUIRE_GPU();
  const GptConfig config = SmallConfig();
  const Batch batch = RandomBatch(kGradBatch, kGradSeq, config.vocab_size, 8);
  const std::vector<float> params = InitialParameters(config);
  const size_t numel = params.size();
  DeviceRun<float> run(config, batch);
  DeviceArray<float> d_params(numel), once(numel), twice(numel), scaled(numel);
  d_params.Put(params);
  once.Zero(), twice.Zero(), scaled.Zero();
  FlatDeviceParameters<float> into_once(run.model->layout(), d_params.data(), once.data());
  FlatDeviceParameters<float> into_twice(run.model->layout(), d_params.data(), twice.data());
  FlatDeviceParameters<float> into_scaled(run.model->layout(), d_params.data(), scaled.data());
  RequireOk(run.model->Forward(into_once, run.tokens.data(), run.targets.data(), batch.b, batch.t, nullptr));
  RequireOk(run.model->Backward(into_once, 1.0f, nullptr));
  RequireOk(run.model->Backward(into_twice, 1.0f, nullptr));
  RequireOk(run.model->Backward(into_twice, 1.0f, nullptr));
  RequireOk(run.model->Backward(into_scaled, 2.0f, nullptr));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::vector<float> g1 = once.Get(), g2 = twice.Get(), gs = scaled.Get();
  // Doubling is exact in fp32; only the order of the embedding op's atomic adds differs between
  // calls, hence a tolerance at rounding level, relative to the largest gradient.
  double scale = 0, err_sum = 0, err_scaled = 0;
  for (size_t i = 0; i < numel; ++i) {
    scale = std::max(scale, std::abs(static_cast<double>(g1[i])));
    err_sum = std::max(err_sum, std::abs(static_cast<double>(g2[i]) - 2.0 * g1[i]));
    err_scaled = std::max(err_scaled, std::abs(static_cast<double>(gs[i]) - 2.0 * g1[i]));
  }
  REQUIRE(scale > 0);
  CHECK(err_sum <= 1e-5 * scale);
  CHECK(err_scaled <= 1e-5 * scale);
}

// The losses of `steps` AdamW steps of GptModel on `batch` from `init`, each before its update.
std::vector<float> TrainOnCpu(const GptConfig& config, std::vector<float> params, const Batch& batch) {
  GptModel model(config, batch.b);
  const size_t numel = params.size();
  std::vector<float> grads(numel), m(numel, 0.0f), v(numel, 0.0f);
  std::vector<DecaySegment> segments;
  for (const auto& group : model.layout().groups()) {
    for (const auto& t : group.tensors) segments.push_back({t.offset, t.offset + t.numel, t.decay});
  }
  OptimizerParams adam;
  adam.kind = OptimizerKind::kAdamW;
  adam.weight_decay = kWeightDecay;
  std::vector<float> losses;
  for (int step = 1; step <= kTrainSteps; ++step) {
    std::fill(grads.begin(), grads.end(), 0.0f);
    dslaunch::testing::FlatParameterAccess access(model.layout(), params, grads);
    losses.push_back(model.Forward(access, batch.tokens.data(), batch.targets.data(), batch.b, batch.t));
    model.Backward(access, 1.0f);
    OptimizerUpdate(adam, kLearningRate, step, params, grads, segments, m, v);
  }
  return losses;
}

// The same on the device in T: fp32 master weights, moments and gradients; the AdamUpdate op per
// tensor (its decay flag) writes the T copy the model reads.
template <typename T>
std::vector<float> TrainOnGpu(const GptConfig& config, const std::vector<float>& init, const Batch& batch) {
  const size_t numel = init.size();
  DeviceRun<T> run(config, batch);
  DeviceArray<float> master(numel), m(numel), v(numel), grads_f32(numel);
  DeviceArray<T> params(numel), grads(numel);
  master.Put(init);
  m.Zero(), v.Zero();
  MakeCopy(master, params);
  std::vector<float> losses;
  for (int step = 1; step <= kTrainSteps; ++step) {
    grads.Zero();
    FlatDeviceParameters<T> flat(run.model->layout(), params.data(), grads.data());
    RequireOk(run.model->Forward(flat, run.tokens.data(), run.targets.data(), batch.b, batch.t, nullptr));
    Result<float> loss = run.model->MeanLoss(nullptr);
    RequireOk(loss.status());
    losses.push_back(*loss);
    RequireOk(run.model->Backward(flat, 1.0f, nullptr));
    const float* g = nullptr;
    if constexpr (std::is_same_v<T, float>) {
      g = grads.data();
    } else {
      RequireOk(cu::Float16To32(grads_f32.data(), grads.data(), kDType<T>, static_cast<long>(numel), nullptr));
      g = grads_f32.data();
    }
    cu::AdamParams adam;
    adam.decoupled = true;
    adam.lr = kLearningRate;
    adam.weight_decay = kWeightDecay;
    adam.step = step;
    for (const auto& group : run.model->layout().groups()) {
      for (const auto& t : group.tensors) {
        RequireOk(cu::AdamUpdate(adam, master.data() + t.offset, g + t.offset, m.data() + t.offset,
                                 v.data() + t.offset, static_cast<long>(t.numel), t.decay, params.data() + t.offset,
                                 kDType<T>, nullptr));
      }
    }
  }
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  return losses;
}

template <typename T>
void CheckTraining(double tolerance) {
  const GptConfig config = SmallConfig();
  const Batch batch = RandomBatch(kTrainBatch, kTrainSeq, config.vocab_size, 9);
  const std::vector<float> init = InitialParameters(config);
  const std::vector<float> cpu = TrainOnCpu(config, init, batch);
  const std::vector<float> gpu = TrainOnGpu<T>(config, init, batch);
  REQUIRE(cpu.size() == gpu.size());
  double worst = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    MESSAGE("step " << i + 1 << ": loss cpu=" << cpu[i] << " gpu=" << gpu[i] << " diff=" << gpu[i] - cpu[i]);
    CAPTURE(i);
    CHECK(std::isfinite(gpu[i]));
    CHECK(std::abs(gpu[i] - cpu[i]) <= tolerance);
    worst = std::max(worst, std::abs(static_cast<double>(gpu[i]) - cpu[i]));
  }
  MESSAGE("largest loss difference " << worst << " (tolerance " << tolerance << ")");
  // The steps train: the loss on the batch falls on both sides (the comparison would otherwise
  // pass for two models that both do nothing).
  CHECK(cpu.back() < cpu.front() - 0.05f);
  CHECK(gpu.back() < gpu.front() - 0.05f);
}

TEST_CASE("Ten AdamW steps of GptCuda<float> follow GptModel's losses within fp32 rounding") {
  DSLAUNCH_REQUIRE_GPU();
  CheckTraining<float>(kTrainToleranceF32);
}

TEST_CASE("Ten AdamW steps of GptCuda<bf16> follow GptModel's fp32 losses within bf16 rounding") {
  DSLAUNCH_REQUIRE_GPU();
  CheckTraining<__nv_bfloat16>(kTrainToleranceBf16);
}

TEST_CASE("GptCuda refuses bad configs, batches and call orders, naming the call") {
  DSLAUNCH_REQUIRE_GPU();
  auto ctx = cu::CublasLtContext::Create();
  RequireOk(ctx.status());
  GptConfig bad_heads = SmallConfig();
  bad_heads.n_head = 5;
  auto refused = GptCuda<float>::Create(bad_heads, 2, *ctx);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK(refused.status().message().find("GptCuda::Create") != std::string::npos);
  GptConfig recompute = SmallConfig();
  recompute.recompute_blocks = 1;
  CHECK(GptCuda<float>::Create(recompute, 2, *ctx).status().code() == StatusCode::kInvalidArgument);
  CHECK(GptCuda<float>::Create(SmallConfig(), 0, *ctx).status().code() == StatusCode::kInvalidArgument);

  auto created = GptCuda<float>::Create(SmallConfig(), 2, *ctx);
  RequireOk(created.status());
  GptCuda<float>& model = **created;
  DeviceArray<float> params(model.layout().numel()), grads(model.layout().numel());
  DeviceArray<int> tokens(3 * 32);
  FlatDeviceParameters<float> flat(model.layout(), params.data(), grads.data());
  const Status early = model.Backward(flat, 1.0f, nullptr);
  CHECK(early.code() == StatusCode::kFailedPrecondition);
  CHECK(early.message().find("GptCuda::Backward") != std::string::npos);
  CHECK(model.MeanLoss(nullptr).status().code() == StatusCode::kFailedPrecondition);
  const Status too_big = model.Forward(flat, tokens.data(), tokens.data(), 3, 32, nullptr);
  CHECK(too_big.code() == StatusCode::kInvalidArgument);
  CHECK(too_big.message().find("GptCuda::Forward") != std::string::npos);
  CHECK(model.Forward(flat, tokens.data(), tokens.data(), 1, 33, nullptr).code() ==
        StatusCode::kInvalidArgument);
  FlatDeviceParameters<float> none(model.layout(), nullptr, nullptr);
  CHECK(model.Forward(none, tokens.data(), tokens.data(), 1, 8, nullptr).code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dslaunch::runtime
