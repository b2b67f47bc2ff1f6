#include "runtime/train/cuda/gpt_device_training.h"

#include <cstdio>
#include <variant>
#include <utility>

#include "common/check.h"

#include "runtime/ops/cuda/cuda_status.h"
#include "runtime/train/token_sampler.h"

namespace dslaunch::runtime {
namespace {

Status TrainingCuda(cudaError_t rc, std::string_view what) { return ops::cuda::CudaStatus(rc, "GptDeviceTraining", what); }

}  // namespace

GptDeviceTraining::GptDeviceTraining(std::unique_ptr<DeviceCollectives> collectives, std::string description)
    : collectives_(std::move(collectives)), description_(std::move(description)) {}

GptDeviceTraining::~GptDeviceTraining() {
  model_.reset();
  ctx_.reset();
  if (compute_ != nullptr) (void)cudaStreamDestroy(compute_);
}

Result<std::unique_ptr<DeviceTraining>> GptDeviceTraining::Create(const TrainConfig& run,
                                                                  std::unique_ptr<DeviceCollectives> collectives,
                                                                  std::string description) {
  const auto* gpt = std::get_if<GptConfig>(&run.model);
  if (gpt == nullptr) return InvalidArgumentError("GptDeviceTraining: the run's model is not gpt");
  const GptConfig& config = *gpt;
  const int max_batch = static_cast<int>(run.batch.micro_batch_per_gpu);
  std::unique_ptr<GptDeviceTraining> training(new GptDeviceTraining(std::move(collectives), std::move(description)));
  DSLAUNCH_RETURN_IF_ERROR(
      TrainingCuda(cudaStreamCreateWithFlags(&training->compute_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"));
  DSLAUNCH_ASSIGN_OR_RETURN(ops::cuda::CublasLtContext ctx, ops::cuda::CublasLtContext::Create());
  training->ctx_ = std::make_unique<ops::cuda::CublasLtContext>(std::move(ctx));
  DSLAUNCH_ASSIGN_OR_RETURN(training->model_, GptCuda<float>::Create(config, max_batch, *training->ctx_));
  const size_t rows = static_cast<size_t>(max_batch) * config.block_size;
  DSLAUNCH_ASSIGN_OR_RETURN(training->tokens_, DeviceBuffer<int>::Allocate(rows, "tokens"));
  DSLAUNCH_ASSIGN_OR_RETURN(training->targets_, DeviceBuffer<int>::Allocate(rows, "targets"));
  return std::unique_ptr<DeviceTraining>(std::move(training));
}

Result<std::unique_ptr<Engine>> GptDeviceTraining::CreateEngine(const ParameterLayout& layout,
                                                                const EngineOptions& options,
                                                                const InitialValues& initial) {
  DSLAUNCH_RETURN_IF_ERROR(CheckDeviceMemory(layout, options));
  DSLAUNCH_ASSIGN_OR_RETURN(std::unique_ptr<DeviceEngine> engine,
                            DeviceEngine::Create(layout, *collectives_, options, initial, compute_));
  engine_ = engine.get();
  return std::unique_ptr<Engine>(std::move(engine));
}

// What the engine will allocate against what the device has free, the model's activations already
// allocated (Create): a clear refusal before anything is allocated, as the CPU's memory check.
Status GptDeviceTraining::CheckDeviceMemory(const ParameterLayout& layout, const EngineOptions& options) const {
  const Communicator& comm = collectives_->communicator();
  const MemoryStats plan = DeviceEngine::PlanBytes(layout, options, comm.world_size(), comm.rank());
  const size_t need = plan.parameters + plan.gradients + plan.optimizer_state + plan.working;
  size_t free = 0, total = 0;
  DSLAUNCH_RETURN_IF_ERROR(TrainingCuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo"));
  if (need <= free) return Status::Ok();
  auto mib = [](size_t bytes) {
    char text[32];
    const double b = static_cast<double>(bytes);
    if (b >= 1024.0 * 1024 * 1024) {
      std::snprintf(text, sizeof(text), "%.1f GiB", b / (1024.0 * 1024 * 1024));
    } else if (b >= 1024.0 * 1024) {
      std::snprintf(text, sizeof(text), "%.1f MiB", b / (1024.0 * 1024));
    } else {
      std::snprintf(text, sizeof(text), "%.1f KiB", b / 1024.0);
    }
    return std::string(text);
  };
  return FailedPreconditionError(
      "device memory: the engine needs " + mib(need) + " (parameters " + mib(plan.parameters) + ", gradients " +
      mib(plan.gradients) + ", optimizer state " + mib(plan.optimizer_state) + ", buffers " + mib(plan.working) +
      ") beside the model's activations (" + mib(model_->activation_bytes()) + "), and the device has " + mib(free) +
      " free of " + mib(total) +
      ": use a higher zero_optimization.stage, more GPUs, or a smaller train_micro_batch_size_per_gpu");
}

DeviceEngine& GptDeviceTraining::engine() {
  DSLAUNCH_CHECK(engine_ != nullptr) << "GptDeviceTraining: CreateEngine first";
  return *engine_;
}

Result<float> GptDeviceTraining::Forward(const std::vector<int>& tokens, const std::vector<int>& targets, int rows,
                                         int seq) {
  const size_t bytes = static_cast<size_t>(rows) * seq * sizeof(int);
  DSLAUNCH_RETURN_IF_ERROR(
      TrainingCuda(cudaMemcpyAsync(tokens_.data(), tokens.data(), bytes, cudaMemcpyHostToDevice, compute_), "copy tokens"));
  DSLAUNCH_RETURN_IF_ERROR(
      TrainingCuda(cudaMemcpyAsync(targets_.data(), targets.data(), bytes, cudaMemcpyHostToDevice, compute_), "copy targets"));
  // No wait here: `tokens` and `targets` outlive MeanLoss, which synchronizes the stream.
  DSLAUNCH_RETURN_IF_ERROR(model_->Forward(engine().device_access(), tokens_.data(), targets_.data(), rows, seq, compute_));
  return model_->MeanLoss(compute_);
}

Result<double> GptDeviceTraining::TrainMicroSteps(TrainTask& task, int64_t step, int micro_steps, float scale) {
  double sum = 0.0;
  for (int m = 0; m < micro_steps; ++m) {
    DSLAUNCH_ASSIGN_OR_RETURN(TrainTask::TokenBatch batch, task.TrainBatch(step, m));
    DSLAUNCH_ASSIGN_OR_RETURN(const float loss, Forward(batch.tokens, batch.targets, batch.rows, batch.seq));
    sum += loss;
    DSLAUNCH_RETURN_IF_ERROR(model_->Backward(engine().device_access(), scale, compute_));
  }
  return sum;
}

Result<float> GptDeviceTraining::ValidationLoss(TrainTask& task, int64_t batch) {
  DSLAUNCH_ASSIGN_OR_RETURN(TrainTask::TokenBatch tokens, task.ValidationBatch(batch));
  return Forward(tokens.tokens, tokens.targets, tokens.rows, tokens.seq);
}

Result<std::string> GptDeviceTraining::Sample(const std::string& prompt, int count, uint64_t seed) {
  const int vocab = model_->config().vocab_size;
  logits_.resize(static_cast<size_t>(vocab));
  std::vector<int> targets;
  return SampleText(prompt, count, seed, model_->config().block_size,
                    [&](const std::vector<int>& window) -> Result<std::span<const float>> {
                      const int len = static_cast<int>(window.size());
                      targets.assign(window.size(), 0);
                      DSLAUNCH_RETURN_IF_ERROR(Forward(window, targets, 1, len).status());
                      DSLAUNCH_RETURN_IF_ERROR(TrainingCuda(cudaMemcpyAsync(logits_.data(),
                                                                    model_->logits() + static_cast<size_t>(len - 1) * vocab,
                                                                    logits_.size() * sizeof(float),
                                                                    cudaMemcpyDeviceToHost, compute_),
                                                    "copy the logits"));
                      DSLAUNCH_RETURN_IF_ERROR(TrainingCuda(cudaStreamSynchronize(compute_), "copy the logits"));
                      return std::span<const float>(logits_);
                    });
}

}  // namespace dslaunch::runtime
