#include "runtime/train/pipeline_stage.h"

#include <algorithm>

#include "common/check.h"
#include "runtime/train/communicator_tensor_group.h"

namespace dslaunch::runtime {
namespace {

// The first stage's access during its last backward of a step: wte's gradient takes the last
// stage's head term just before it is reported ready. Everything else goes straight through.
class TiedGradientAccess final : public ParameterAccess {
 public:
  TiedGradientAccess(ParameterAccess& inner, Communicator& pipeline, int last_stage, size_t wte_size)
      : inner_(inner), pipeline_(pipeline), last_stage_(last_stage), received_(wte_size) {}

  std::span<const float> Acquire(int group) override { return inner_.Acquire(group); }
  void Release(int group) override { inner_.Release(group); }
  std::span<float> Gradient(int group) override { return inner_.Gradient(group); }
  void GradientReady(int group) override {
    if (group == 0 && status_.ok()) {  // the embeddings: wte first
      status_ = pipeline_.Recv(std::span<float>(received_), last_stage_).WithContext("the head's gradient of wte");
      if (status_.ok()) {
        std::span<float> wte = inner_.Gradient(0).first(received_.size());
        for (size_t i = 0; i < received_.size(); ++i) wte[i] += received_[i];
      }
    }
    inner_.GradientReady(group);
  }
  const Status& status() const { return status_; }

 private:
  ParameterAccess& inner_;
  Communicator& pipeline_;
  const int last_stage_;
  std::vector<float> received_;
  Status status_;
};

}  // namespace

Result<std::vector<StageBlocks>> PartitionStages(const GptConfig& model, int stages, PartitionMethod method) {
  const std::vector<double> groups = GptModel::GroupSizes(model);  // embeddings, blocks, ln_f
  const double head = static_cast<double>(model.vocab_size) * model.n_embd;
  const LayerWeights weights{model.n_layer, groups[1], groups.front(), groups.back() + head};
  return PartitionLayers(weights, stages, method);
}

double PipelineStage::ActivationBytes(const PipelineStageOptions& options, int stages, int stage) {
  const StageBlocks blocks = options.partition[static_cast<size_t>(stage)];
  const GptPart part{blocks.begin, blocks.end, 0, options.tensor_size};
  const bool first = blocks.begin == 0, last = blocks.end == options.model.n_layer;
  const double rows = static_cast<double>(options.micro_batch) * options.seq_len;
  const double crossing = rows * options.model.n_embd * sizeof(float);
  const double per_slot = GptModel::ActivationBytes(options.model, options.micro_batch, part) +
                          (first ? 0 : crossing) + (last ? 0 : crossing) + 2 * rows * sizeof(int);
  const double vocab_rows =
      static_cast<double>(ShardFor(static_cast<size_t>(options.model.vocab_size), options.tensor_size, 0).size());
  const double tied = stages > 1 && last ? 2.0 * vocab_rows * options.model.n_embd * sizeof(float) : 0;
  return per_slot * MicroBatchesHeld(options.schedule, stages, stage, options.micro_batches) + tied;
}

size_t PipelineStage::activation_bytes() const {
  size_t bytes = (tied_weight_.size() + tied_gradient_.size()) * sizeof(float);
  for (size_t k = 0; k < models_.size(); ++k) {
    bytes += models_[k]->activation_bytes() + (inputs_[k].size() + output_grads_[k].size()) * sizeof(float) +
             (tokens_[k].size() + targets_[k].size()) * sizeof(int);
  }
  return bytes;
}

PipelineStage::PipelineStage(const PipelineStageOptions& options, Communicator& pipeline, Communicator* tensor)
    : pipeline_(pipeline), tensor_(tensor), options_(options), stages_(pipeline.world_size()), stage_(pipeline.rank()) {
  DSLAUNCH_CHECK(static_cast<int>(options.partition.size()) == stages_ && options.micro_batch > 0 &&
                 options.seq_len > 0 && options.micro_batches > 0)
      << options.partition.size() << " stages partitioned for a pipeline group of " << stages_;
  DSLAUNCH_CHECK(options.tensor_size == 1 || (tensor != nullptr && tensor->world_size() == options.tensor_size))
      << "a tensor split of " << options.tensor_size << " needs a tensor group of that size";
  const StageBlocks blocks = options.partition[stage_];
  const GptPart part{blocks.begin, blocks.end, options.tensor_size > 1 ? tensor->rank() : 0, options.tensor_size};
  if (options.tensor_size > 1) tensor_group_ = std::make_unique<CommunicatorTensorGroup>(*tensor);
  const int slots = MicroBatchesHeld(options.schedule, stages_, stage_, options.micro_batches);
  const size_t rows = static_cast<size_t>(options.micro_batch) * options.seq_len;
  for (int k = 0; k < slots; ++k) {
    models_.push_back(std::make_unique<GptModel>(options.model, options.micro_batch, part));
    if (tensor_group_) models_.back()->SetTensorGroup(*tensor_group_);
    inputs_.emplace_back(first() ? 0 : rows * options.model.n_embd);
    output_grads_.emplace_back(last() ? 0 : rows * options.model.n_embd);
    tokens_.emplace_back(rows);
    targets_.emplace_back(rows);
  }
  if (stages_ > 1 && last()) {
    tied_weight_.resize(tied_weight_size());
    tied_gradient_.resize(tied_weight_size());
    for (auto& model : models_) model->SetTiedHead(tied_weight_, tied_gradient_);
  }
}

Status PipelineStage::SendTiedWeight(ParameterAccess& params) {
  if (stages_ == 1) return Status::Ok();
  if (first()) {
    std::span<const float> embeddings = params.Acquire(0);
    Status sent = pipeline_.Send(embeddings.first(tied_weight_size()), stages_ - 1);
    params.Release(0);
    return sent.WithContext("wte to the last stage");
  }
  if (last()) return pipeline_.Recv(std::span<float>(tied_weight_), 0).WithContext("wte from the first stage");
  return Status::Ok();
}

Result<double> PipelineStage::RunStep(ParameterAccess& params, float scale, const FillBatch& fill) {
  DSLAUNCH_RETURN_IF_ERROR(SendTiedWeight(params));
  std::fill(tied_gradient_.begin(), tied_gradient_.end(), 0.0f);
  const int m = options_.micro_batches;
  const int t = options_.seq_len, b = options_.micro_batch;
  double loss = 0;
  for (const PipeInstruction& in : StageSchedule(options_.schedule, stages_, stage_, m)) {
    const int slot = in.micro_batch % slots();
    GptModel& model = *models_[slot];
    switch (in.op) {
      case PipeOp::kRecvActivation:
        DSLAUNCH_RETURN_IF_ERROR(pipeline_.Recv(std::span<float>(inputs_[slot]), stage_ - 1));
        break;
      case PipeOp::kForward:
        fill(in.micro_batch, tokens_[slot], targets_[slot]);
        loss += model.ForwardPart(params, tokens_[slot].data(), inputs_[slot].data(), targets_[slot].data(), b, t);
        DSLAUNCH_RETURN_IF_ERROR(model.status());
        break;
      case PipeOp::kSendActivation:
        DSLAUNCH_RETURN_IF_ERROR(pipeline_.Send(model.output(), stage_ + 1));
        break;
      case PipeOp::kRecvGradient:
        DSLAUNCH_RETURN_IF_ERROR(pipeline_.Recv(std::span<float>(output_grads_[slot]), stage_ + 1));
        break;
      case PipeOp::kBackward:
        if (stages_ > 1 && first() && in.micro_batch == m - 1) {
          TiedGradientAccess tied(params, pipeline_, stages_ - 1, tied_weight_size());
          model.BackwardPart(tied, scale, output_grads_[slot].data());
          DSLAUNCH_RETURN_IF_ERROR(tied.status());
        } else {
          model.BackwardPart(params, scale, output_grads_[slot].data());
        }
        DSLAUNCH_RETURN_IF_ERROR(model.status());
        break;
      case PipeOp::kSendGradient:
        DSLAUNCH_RETURN_IF_ERROR(pipeline_.Send(model.input_gradient(), stage_ - 1));
        break;
    }
  }
  // After the last backward's own gradient: with two stages it shares the link to the first stage,
  // which takes that gradient before this one.
  if (stages_ > 1 && last()) DSLAUNCH_RETURN_IF_ERROR(pipeline_.Send(std::span<const float>(tied_gradient_), 0));
  DSLAUNCH_RETURN_IF_ERROR(pipeline_.FlushSends());
  return last() ? loss : 0.0;
}

Result<double> PipelineStage::RunValidation(ParameterAccess& params, int batches, const FillBatch& fill) {
  DSLAUNCH_RETURN_IF_ERROR(SendTiedWeight(params));
  GptModel& model = *models_.front();
  const int t = options_.seq_len, b = options_.micro_batch;
  double loss = 0;
  for (int i = 0; i < batches; ++i) {
    if (!first()) DSLAUNCH_RETURN_IF_ERROR(pipeline_.Recv(std::span<float>(inputs_.front()), stage_ - 1));
    fill(i, tokens_.front(), targets_.front());
    loss += model.ForwardPart(params, tokens_.front().data(), inputs_.front().data(), targets_.front().data(), b, t);
    DSLAUNCH_RETURN_IF_ERROR(model.status());
    if (!last()) DSLAUNCH_RETURN_IF_ERROR(pipeline_.Send(model.output(), stage_ + 1));
  }
  DSLAUNCH_RETURN_IF_ERROR(pipeline_.FlushSends());
  return last() ? loss : 0.0;
}

Result<std::vector<int>> PipelineStage::Sample(ParameterAccess& params, std::vector<int> prompt, int count,
                                               uint64_t seed) {
  DSLAUNCH_RETURN_IF_ERROR(SendTiedWeight(params));
  GptModel& model = *models_.front();
  const size_t block = static_cast<size_t>(options_.model.block_size);
  std::vector<int>& context = prompt;
  std::vector<int> window, dummy_targets, sampled;
  std::vector<float> input;  // the window's activation from the stage before
  TokenSampler sampler(seed);
  for (int k = 0; k < count; ++k) {
    const size_t len = std::min(context.size(), block);
    window.assign(context.end() - static_cast<std::ptrdiff_t>(len), context.end());
    dummy_targets.assign(len, 0);
    if (!first()) {
      input.resize(len * options_.model.n_embd);
      DSLAUNCH_RETURN_IF_ERROR(pipeline_.Recv(std::span<float>(input), stage_ - 1));
    }
    model.ForwardPart(params, window.data(), input.data(), dummy_targets.data(), 1, static_cast<int>(len));
    DSLAUNCH_RETURN_IF_ERROR(model.status());
    if (!last()) DSLAUNCH_RETURN_IF_ERROR(pipeline_.Send(model.output(), stage_ + 1));
    int64_t next = 0;
    if (last()) {
      DSLAUNCH_ASSIGN_OR_RETURN(next, DrawNext(sampler, model, len - 1));
    }
    DSLAUNCH_RETURN_IF_ERROR(pipeline_.Broadcast(std::span<int64_t>(&next, 1), stages_ - 1).WithContext("sampled token"));
    context.push_back(static_cast<int>(next));
    sampled.push_back(static_cast<int>(next));
  }
  DSLAUNCH_RETURN_IF_ERROR(pipeline_.FlushSends());
  return sampled;
}

Result<int> PipelineStage::DrawNext(TokenSampler& sampler, const GptModel& model, size_t position) {
  const size_t rows = static_cast<size_t>(model.vocab_end() - model.vocab_begin());
  std::span<const float> mine = model.logits().subspan(position * rows, rows);
  if (!tensor_group_) return sampler.Draw(mine);
  // Every tensor rank gathers the whole row and draws the same token from the same generator.
  std::vector<size_t> counts;
  for (int r = 0; r < tensor_->world_size(); ++r) {
    counts.push_back(ShardFor(static_cast<size_t>(options_.model.vocab_size), tensor_->world_size(), r).size());
  }
  std::vector<float> row(static_cast<size_t>(options_.model.vocab_size));
  DSLAUNCH_RETURN_IF_ERROR(tensor_group_->Gather(mine, row, counts).WithContext("the sampled position's logits"));
  return sampler.Draw(row);
}

}  // namespace dslaunch::runtime
