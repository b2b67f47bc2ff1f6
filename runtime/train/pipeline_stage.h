// PipelineStage: one pipeline stage of the GPT model and its part of a step (docs/parallelism.md,
// "The pipelined step").
//
// The stage holds its blocks (GptModel parts) in as many copies of their activations as its
// schedule keeps micro-batches at once (1F1B: p - s; GPipe: m), and runs its instruction list
// (runtime/parallel/pipeline_schedule.h) with the pipeline group's Send and Recv: activations
// forward, their gradients back, [micro_batch x seq_len][n_embd] floats each.
//
// The tied token embedding lives with the first stage's engine only. With more than one stage,
// at the start of each step (and of each validation) the first stage sends wte's values to the
// last stage, whose head reads them. The last stage adds the head's gradient of wte over the
// step's micro-batches apart and sends it to the first stage after its last backward. The first
// stage adds it into wte's gradient in its last micro-batch's backward, just before the engine
// is told that gradient is ready. So wte gets both terms once per step, as in the whole model;
// only their order of addition differs (docs/parallelism.md, "Tied embeddings").
//
// With a tensor group of t > 1 ranks (docs/parallelism.md, "Tensor parallelism") each stage's
// parts are this rank's share of the split tensors, their sums over the tensor group made inside
// forward and backward; the crossing activations are whole on every tensor rank, and each tensor
// rank exchanges them with the same tensor rank of the next stage, whose pipeline group it shares.
// The tied wte travels as this tensor rank's rows.
//
// Collective over the pipeline group (and the tensor group): every stage calls RunStep (or
// RunValidation) together. Not thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "common/status.h"
#include "runtime/comm/communicator.h"
#include "runtime/core/parameter_access.h"
#include "runtime/models/gpt.h"
#include "runtime/models/tensor_group.h"
#include "runtime/parallel/layer_partition.h"
#include "runtime/parallel/pipeline_schedule.h"
#include "runtime/train/token_sampler.h"

namespace dslaunch::runtime {

// The blocks of each of `stages` stages of `model` by `method` (runtime/parallel/layer_partition.h):
// the embeddings weigh on the first stage, the final norm and the head's copy of wte on the last.
Result<std::vector<StageBlocks>> PartitionStages(const GptConfig& model, int stages, PartitionMethod method);

struct PipelineStageOptions {
  GptConfig model;
  std::vector<StageBlocks> partition;  // one entry per stage of the pipeline group
  PipeSchedule schedule = PipeSchedule::k1F1B;
  int micro_batch = 1;    // sequences per micro-batch
  int seq_len = 1;        // tokens per sequence
  int micro_batches = 1;  // per step: gradient_accumulation_steps
  int tensor_size = 1;    // ranks of the tensor group (tensor_parallel.autotp_size)
};

class PipelineStage {
 public:
  // The stage of `pipeline`'s rank, and with options.tensor_size > 1 its share of `tensor`'s rank.
  // Preconditions (checked): one partition entry per rank of `pipeline`, positive sizes, a tensor
  // group of options.tensor_size ranks where it is more than 1. The groups must outlive the stage.
  PipelineStage(const PipelineStageOptions& options, Communicator& pipeline, Communicator* tensor = nullptr);

  // The stage's parameters (its part's layout) and their initial values, the whole model's.
  const GptModel& model() const { return *models_.front(); }
  bool first() const { return model().first(); }
  bool last() const { return model().last(); }
  // Copies of the activations kept (the schedule's micro-batches held at once).
  int slots() const { return static_cast<int>(models_.size()); }

  // The bytes stage `stage` of `stages` allocates for activations: its part's buffers in as many
  // copies as its schedule holds micro-batches, with each copy's crossing activations (the one
  // received, the gradient received back) and tokens, and on the last of several stages the copy
  // of wte and its gradient. The memory estimate counts this (runtime/train/memory_estimate.h).
  // Split over tensor ranks: tensor rank 0's, the largest (its rows of the vocabulary are the
  // most where they do not divide).
  static double ActivationBytes(const PipelineStageOptions& options, int stages, int stage);
  // The same, measured on this stage's buffers.
  size_t activation_bytes() const;

  // Fills micro-batch `micro_batch`'s inputs and targets (micro_batch x seq_len each).
  using FillBatch = std::function<void(int micro_batch, std::vector<int>& tokens, std::vector<int>& targets)>;

  // One step's micro-batches, their gradients accumulated through `params` (the engine's access:
  // BeginStep before, Step after), each micro-batch's loss multiplied by `scale` in backward.
  // Returns the sum of the micro-batches' losses on the last stage, 0 on the others. kAborted
  // (naming the peer) when a message does not arrive.
  Result<double> RunStep(ParameterAccess& params, float scale, const FillBatch& fill);
  // Forwards only, over `batches` micro-batches: the sum of their losses on the last stage.
  Result<double> RunValidation(ParameterAccess& params, int batches, const FillBatch& fill);
  // `count` tokens after `prompt`, as the whole model samples them (runtime/train/token_sampler.h):
  // each token's window goes through the stages, the last stage draws the next token and
  // broadcasts it over the pipeline group. Every stage returns the tokens.
  Result<std::vector<int>> Sample(ParameterAccess& params, std::vector<int> prompt, int count, uint64_t seed);

 private:
  // The first stage sends wte's current values to the last stage (with more than one stage).
  Status SendTiedWeight(ParameterAccess& params);
  // This tensor rank's rows of wte.
  size_t tied_weight_size() const {
    return static_cast<size_t>(model().vocab_end() - model().vocab_begin()) * options_.model.n_embd;
  }
  // The next token from the last position's logits, gathered over the tensor group when split.
  Result<int> DrawNext(TokenSampler& sampler, const GptModel& model, size_t position);

  Communicator& pipeline_;
  Communicator* tensor_;
  std::unique_ptr<TensorGroup> tensor_group_;  // over tensor_, with a split
  const PipelineStageOptions options_;
  const int stages_, stage_;
  std::vector<std::unique_ptr<GptModel>> models_;  // one per slot
  std::vector<std::vector<float>> inputs_, output_grads_;
  std::vector<std::vector<int>> tokens_, targets_;
  // The last stage's copy of wte and the head's gradient of it (more than one stage).
  std::vector<float> tied_weight_, tied_gradient_;
};

}  // namespace dslaunch::runtime
