#include "runtime/train/train_task.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

#include "runtime/data/batch_sampler.h"
#include "runtime/data/token_shard.h"
#include "runtime/models/gpt.h"
#include "runtime/models/mlp.h"
#include "runtime/train/pipeline_stage.h"
#include "runtime/train/token_sampler.h"

namespace dslaunch::runtime {
namespace {

// ---- gpt on token shards ----

// The token data fits `gpt`: each shard given holds a sample of seq_len + 1 tokens (a validation
// file that holds none would silently skip validation), and every token id is within the
// vocabulary.
Status CheckTokenData(const TrainConfig& config, const GptConfig& gpt, const TrainData& data,
                      const BatchGeometry& train, const BatchGeometry& val, int seq_len) {
  auto too_short = [&](const std::string& file, size_t tokens) {
    return InvalidArgumentError(file + ": " + std::to_string(tokens) + " tokens hold no sequence of " +
                                std::to_string(seq_len) + " + 1 tokens ($.data.seq_len is " + std::to_string(seq_len) +
                                ")");
  };
  if (train.windows() == 0) return too_short(config.data.train, data.train.size());
  if (!config.data.val.empty() && val.windows() == 0) return too_short(config.data.val, data.val.size());
  for (const auto* shard : {&data.train, &data.val}) {
    for (uint16_t t : *shard) {
      if (t >= gpt.vocab_size) {
        return InvalidArgumentError("token id " + std::to_string(t) + " in " +
                                    (shard == &data.train ? config.data.train : config.data.val) +
                                    " is outside model.vocab_size " + std::to_string(gpt.vocab_size));
      }
    }
  }
  return Status::Ok();
}

// Inputs and targets of `windows`, each seq_len + 1 tokens of the shard.
void FillWindows(const std::vector<uint16_t>& shard, const std::vector<int64_t>& windows, int seq_len,
                 std::vector<int>& tokens, std::vector<int>& targets) {
  tokens.resize(windows.size() * seq_len);
  targets.resize(windows.size() * seq_len);
  for (size_t i = 0; i < windows.size(); ++i) {
    const size_t start = static_cast<size_t>(windows[i]) * seq_len;
    for (int k = 0; k < seq_len; ++k) {
      tokens[i * seq_len + k] = shard[start + k];
      targets[i * seq_len + k] = shard[start + k + 1];
    }
  }
}

class GptTask final : public TrainTask {
 public:
  GptTask(const TrainConfig& config, const GptConfig& gpt, const TrainData& data, int rank, int world)
      : config_(config),
        data_(data),
        rank_(rank),
        seq_len_(config.data.seq_len > 0 ? config.data.seq_len : gpt.block_size),
        micro_(static_cast<int>(config.batch.micro_batch_per_gpu)),
        train_{static_cast<int64_t>(data.train.size()), seq_len_, micro_,
               static_cast<int>(config.batch.gradient_accumulation_steps), world},
        val_{static_cast<int64_t>(data.val.size()), seq_len_, micro_, 1, world},
        model_(gpt, micro_) {}

  Status Validate(const GptConfig& gpt) const { return CheckTokenData(config_, gpt, data_, train_, val_, seq_len_); }

  const ParameterLayout& layout() const override { return model_.layout(); }
  void InitParameters(std::span<float> flat, uint64_t seed) const override { model_.InitParameters(flat, seed); }
  void InitRange(size_t begin, std::span<float> out, uint64_t seed) const override {
    model_.InitRange(begin, out, seed);
  }
  std::string_view name() const override { return "gpt"; }
  bool classifier() const override { return false; }
  int64_t TokensPerSample() const override { return seq_len_; }
  double FlopsPerToken() const override { return model_.FlopsPerToken(seq_len_); }
  size_t ActivationBytes() const override { return model_.activation_bytes(); }
  int64_t GlobalBatch() const override { return train_.global_batch(); }

  float ForwardTrain(ParameterAccess& params, int64_t step, int micro_step) override {
    Fill(data_.train, WindowsForMicroStep(config_.seed, train_, step, micro_step, rank_));
    return model_.Forward(params, inputs_.data(), targets_.data(), micro_, seq_len_);
  }
  void Backward(ParameterAccess& params, float scale) override { model_.Backward(params, scale); }
  bool HasValidation() const override { return val_.windows() > 0; }
  float ForwardValidation(ParameterAccess& params, int64_t batch, int64_t*) override {
    Fill(data_.val, WindowsForMicroStep(config_.seed, val_, batch, 0, rank_));
    return model_.Forward(params, inputs_.data(), targets_.data(), micro_, seq_len_);
  }
  int ValidationRows() const override { return micro_ * seq_len_; }

  // Each next token drawn from the last position's logits (TokenSampler), over a window of at most
  // block_size tokens.
  Result<std::string> Sample(ParameterAccess& params, const std::string& prompt, int count, uint64_t seed) override {
    const int vocab = model_.config().vocab_size;
    std::vector<int> dummy_targets;
    return SampleText(prompt, count, seed, model_.config().block_size,
                      [&](const std::vector<int>& window) -> Result<std::span<const float>> {
                        const int len = static_cast<int>(window.size());
                        dummy_targets.assign(window.size(), 0);
                        model_.Forward(params, window.data(), dummy_targets.data(), 1, len);
                        return model_.logits().subspan(static_cast<size_t>(len - 1) * vocab, vocab);
                      });
  }

  Result<TokenBatch> TrainBatch(int64_t step, int micro_step) override {
    Fill(data_.train, WindowsForMicroStep(config_.seed, train_, step, micro_step, rank_));
    return TokenBatch{inputs_, targets_, micro_, seq_len_};
  }
  Result<TokenBatch> ValidationBatch(int64_t batch) override {
    Fill(data_.val, WindowsForMicroStep(config_.seed, val_, batch, 0, rank_));
    return TokenBatch{inputs_, targets_, micro_, seq_len_};
  }

 private:
  void Fill(const std::vector<uint16_t>& shard, const std::vector<int64_t>& windows) {
    FillWindows(shard, windows, seq_len_, inputs_, targets_);
  }

  const TrainConfig& config_;
  const TrainData& data_;
  const int rank_;
  const int seq_len_;
  const int micro_;
  const BatchGeometry train_, val_;
  GptModel model_;
  std::vector<int> inputs_, targets_;
};

// ---- a pipeline stage of gpt on token shards ----

// The windows a data-parallel copy reads are the data-parallel run's: every stage of a pipeline,
// and every tensor rank of a stage, reads its copy's micro-batches (the first stage uses the
// inputs, the last the targets). Of a last stage's tensor ranks, which all compute the same loss,
// the first reports it.
class GptStageTask final : public TrainTask {
 public:
  GptStageTask(const TrainConfig& config, const GptConfig& gpt, const TrainData& data, int data_rank, int data_world,
               std::vector<StageBlocks> partition, Communicator& pipeline, Communicator& tensor)
      : config_(config),
        gpt_(gpt),
        data_(data),
        data_rank_(data_rank),
        stages_(static_cast<int>(partition.size())),
        tensor_size_(tensor.world_size()),
        reports_loss_(tensor.rank() == 0),
        seq_len_(config.data.seq_len > 0 ? config.data.seq_len : gpt.block_size),
        micro_(static_cast<int>(config.batch.micro_batch_per_gpu)),
        train_{static_cast<int64_t>(data.train.size()), seq_len_, micro_,
               static_cast<int>(config.batch.gradient_accumulation_steps), data_world},
        val_{static_cast<int64_t>(data.val.size()), seq_len_, micro_, 1, data_world},
        stage_(PipelineStageOptions{gpt, std::move(partition), config.pipeline.schedule, micro_, seq_len_,
                                    static_cast<int>(config.batch.gradient_accumulation_steps), tensor_size_},
               pipeline, &tensor) {
    placement_.whole = GptModel(gpt, 0).layout();
    placement_.pieces = stage_.model().WholePieces();
    if (tensor.rank() > 0) placement_.saved_elsewhere = stage_.model().ReplicatedRanges();
  }

  Status Validate() const { return CheckTokenData(config_, gpt_, data_, train_, val_, seq_len_); }

  const ParameterLayout& layout() const override { return stage_.model().layout(); }
  void InitParameters(std::span<float> flat, uint64_t seed) const override { stage_.model().InitParameters(flat, seed); }
  void InitRange(size_t begin, std::span<float> out, uint64_t seed) const override {
    stage_.model().InitRange(begin, out, seed);
  }
  std::string_view name() const override { return "gpt"; }
  bool classifier() const override { return false; }
  int64_t TokensPerSample() const override { return seq_len_; }
  // The whole model's: MFU counts the job's tokens against all its ranks.
  double FlopsPerToken() const override { return GptModel::FlopsPerToken(gpt_, seq_len_); }
  size_t ActivationBytes() const override { return stage_.activation_bytes(); }
  int64_t GlobalBatch() const override { return train_.global_batch(); }

  float ForwardTrain(ParameterAccess&, int64_t, int) override {
    DSLAUNCH_CHECK(false) << "a pipeline stage trains through TrainMicroSteps";
    return 0;
  }
  void Backward(ParameterAccess&, float) override {
    DSLAUNCH_CHECK(false) << "a pipeline stage trains through TrainMicroSteps";
  }
  Result<double> TrainMicroSteps(ParameterAccess& params, int64_t step, int, float scale) override {
    DSLAUNCH_ASSIGN_OR_RETURN(
        double loss, stage_.RunStep(params, scale, [&](int mb, std::vector<int>& tokens, std::vector<int>& targets) {
          FillWindows(data_.train, WindowsForMicroStep(config_.seed, train_, step, mb, data_rank_), seq_len_, tokens,
                      targets);
        }));
    return reports_loss_ ? loss : 0.0;
  }
  bool HasValidation() const override { return val_.windows() > 0; }
  float ForwardValidation(ParameterAccess&, int64_t, int64_t*) override {
    DSLAUNCH_CHECK(false) << "a pipeline stage validates through ValidationLossSum";
    return 0;
  }
  Result<double> ValidationLossSum(ParameterAccess& params, int64_t batches, int64_t*,
                                   const std::function<void()>& after_batch) override {
    auto sum = stage_.RunValidation(params, static_cast<int>(batches),
                                    [&](int batch, std::vector<int>& tokens, std::vector<int>& targets) {
                                      FillWindows(data_.val, WindowsForMicroStep(config_.seed, val_, batch, 0, data_rank_),
                                                  seq_len_, tokens, targets);
                                      if (after_batch) after_batch();
                                    });
    if (!sum.ok()) return sum;
    return reports_loss_ ? *sum : 0.0;
  }
  int ValidationRows() const override { return micro_ * seq_len_; }
  int LossRanks(int world) const override { return world / (stages_ * tensor_size_); }
  std::vector<ShardRange> ReplicatedRanges() const override { return stage_.model().ReplicatedRanges(); }
  const PartPlacement* placement() const override { return &placement_; }
  Result<std::string> Sample(ParameterAccess& params, const std::string& prompt, int count, uint64_t seed) override {
    DSLAUNCH_ASSIGN_OR_RETURN(std::vector<int> tokens,
                              stage_.Sample(params, TokenSampler::PromptTokens(prompt), count, seed));
    std::string text;
    for (int token : tokens) text.push_back(TokenSampler::TokenText(token));
    return text;
  }

 private:
  const TrainConfig& config_;
  const GptConfig gpt_;
  const TrainData& data_;
  const int data_rank_;
  const int stages_;
  const int tensor_size_;
  const bool reports_loss_;
  const int seq_len_;
  const int micro_;
  const BatchGeometry train_, val_;
  PipelineStage stage_;
  PartPlacement placement_;  // the whole model's layout, and where this part lies in it
};

// ---- mlp on IDX images ----

// A set of n images is sampled as n "windows" of one token: BatchGeometry{n + 1 tokens, length 1}
// has exactly n windows, so the sample order is the token shards' (docs/data.md).
BatchGeometry ImageGeometry(const IdxDataset& data, int micro, int accumulation, int world) {
  return {static_cast<int64_t>(data.images.n) + 1, 1, micro, accumulation, world};
}

class MlpTask final : public TrainTask {
 public:
  MlpTask(const TrainConfig& config, const MlpConfig& mlp, const TrainData& data, int rank, int world)
      : config_(config),
        data_(data),
        rank_(rank),
        micro_(static_cast<int>(config.batch.micro_batch_per_gpu)),
        train_(ImageGeometry(data.train_images, micro_, static_cast<int>(config.batch.gradient_accumulation_steps),
                             world)),
        val_(ImageGeometry(data.val_images, micro_, 1, world)),
        model_(mlp.widths, micro_) {}

  Status Validate() const {
    DSLAUNCH_RETURN_IF_ERROR(
        CheckIdxDatasetFits(data_.train_images, model_.input_width(), model_.num_classes(), "data.train"));
    if (data_.val_images.images.n > 0) {
      DSLAUNCH_RETURN_IF_ERROR(
          CheckIdxDatasetFits(data_.val_images, model_.input_width(), model_.num_classes(), "data.val"));
    }
    return Status::Ok();
  }

  const ParameterLayout& layout() const override { return model_.layout(); }
  void InitParameters(std::span<float> flat, uint64_t seed) const override { model_.InitParameters(flat, seed); }
  void InitRange(size_t begin, std::span<float> out, uint64_t seed) const override {
    model_.InitRange(begin, out, seed);
  }
  std::string_view name() const override { return "mlp"; }
  bool classifier() const override { return true; }
  int64_t TokensPerSample() const override { return 1; }
  double FlopsPerToken() const override { return model_.FlopsPerSample(); }
  size_t ActivationBytes() const override { return model_.activation_bytes(); }
  int64_t GlobalBatch() const override { return train_.global_batch(); }

  float ForwardTrain(ParameterAccess& params, int64_t step, int micro_step) override {
    Fill(data_.train_images, WindowsForMicroStep(config_.seed, train_, step, micro_step, rank_));
    return model_.Forward(params, inputs_.data(), labels_.data(), micro_);
  }
  void Backward(ParameterAccess& params, float scale) override { model_.Backward(params, scale); }
  bool HasValidation() const override { return val_.windows() > 0; }
  float ForwardValidation(ParameterAccess& params, int64_t batch, int64_t* correct) override {
    Fill(data_.val_images, WindowsForMicroStep(config_.seed, val_, batch, 0, rank_));
    const float loss = model_.Forward(params, inputs_.data(), labels_.data(), micro_);
    *correct += model_.correct();
    return loss;
  }
  int ValidationRows() const override { return micro_; }
  Result<std::string> Sample(ParameterAccess&, const std::string&, int, uint64_t) override { return std::string(); }

 private:
  void Fill(const IdxDataset& data, const std::vector<int64_t>& indices) {
    inputs_.resize(indices.size() * static_cast<size_t>(model_.input_width()));
    labels_.resize(indices.size());
    GatherIdxBatch(data, indices, inputs_.data(), labels_.data());
  }

  const TrainConfig& config_;
  const TrainData& data_;
  const int rank_;
  const int micro_;
  const BatchGeometry train_, val_;
  MlpModel model_;
  std::vector<float> inputs_;
  std::vector<int> labels_;
};

}  // namespace

Result<TrainData> ReadTrainData(const TrainConfig& config) {
  TrainData data;
  if (config.data.format == DataFormat::kIdx) {
    DSLAUNCH_ASSIGN_OR_RETURN(data.train_images, ReadIdxDataset(config.data.train, config.data.train_labels));
    if (!config.data.val.empty()) {
      DSLAUNCH_ASSIGN_OR_RETURN(data.val_images, ReadIdxDataset(config.data.val, config.data.val_labels));
    }
    return data;
  }
  DSLAUNCH_ASSIGN_OR_RETURN(data.train, ReadTokenShard(config.data.train));
  if (!config.data.val.empty()) {
    DSLAUNCH_ASSIGN_OR_RETURN(data.val, ReadTokenShard(config.data.val));
  }
  return data;
}

Result<double> TrainTask::TrainMicroSteps(ParameterAccess& params, int64_t step, int micro_steps, float scale) {
  double sum = 0.0;
  for (int m = 0; m < micro_steps; ++m) {
    sum += ForwardTrain(params, step, m);
    Backward(params, scale);
  }
  return sum;
}

Result<TrainTask::TokenBatch> TrainTask::TrainBatch(int64_t, int) {
  return FailedPreconditionError("the " + std::string(name()) + " task has no token batches for a model on the device");
}

Result<TrainTask::TokenBatch> TrainTask::ValidationBatch(int64_t) {
  return FailedPreconditionError("the " + std::string(name()) + " task has no token batches for a model on the device");
}

Result<double> TrainTask::ValidationLossSum(ParameterAccess& params, int64_t batches, int64_t* correct,
                                            const std::function<void()>& after_batch) {
  double sum = 0.0;
  for (int64_t i = 0; i < batches; ++i) {
    sum += ForwardValidation(params, i, correct);
    if (after_batch) after_batch();
  }
  return sum;
}

Result<std::unique_ptr<TrainTask>> TrainTask::CreateStage(const TrainConfig& config, const TrainData& data, int rank,
                                                          const ModelParallelRun& parallel) {
  const auto* gpt = std::get_if<GptConfig>(&config.model);
  if (gpt == nullptr) return InvalidArgumentError("pipeline.stages: only the gpt model is split into stages");
  DSLAUNCH_ASSIGN_OR_RETURN(std::vector<StageBlocks> partition,
                            PartitionStages(*gpt, parallel.grid.shape().pipeline, config.pipeline.partition_method));
  const GridCoordinates at = parallel.grid.CoordinatesOf(rank);
  auto task = std::make_unique<GptStageTask>(config, *gpt, data, at.data, parallel.grid.shape().data,
                                             std::move(partition), *parallel.pipeline, *parallel.tensor);
  DSLAUNCH_RETURN_IF_ERROR(task->Validate());
  return std::unique_ptr<TrainTask>(std::move(task));
}

Result<std::unique_ptr<TrainTask>> TrainTask::Create(const TrainConfig& config, const TrainData& data, int rank,
                                                     int world) {
  if (const auto* gpt = std::get_if<GptConfig>(&config.model)) {
    auto task = std::make_unique<GptTask>(config, *gpt, data, rank, world);
    DSLAUNCH_RETURN_IF_ERROR(task->Validate(*gpt));
    return std::unique_ptr<TrainTask>(std::move(task));
  }
  const auto& mlp = std::get<MlpConfig>(config.model);
  if (data.train_images.images.n == 0) {
    return InvalidArgumentError("model.type \"mlp\" trains on images: set data.format to \"idx\" with "
                                "data.train and data.train_labels");
  }
  auto task = std::make_unique<MlpTask>(config, mlp, data, rank, world);
  DSLAUNCH_RETURN_IF_ERROR(task->Validate());
  return std::unique_ptr<TrainTask>(std::move(task));
}

}  // namespace dslaunch::runtime
