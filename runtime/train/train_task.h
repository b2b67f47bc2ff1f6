// TrainTask: a model and its data behind one face, so that one training loop (runtime/train/trainer.h)
// trains either bundled model: `gpt` on token shards, `mlp` on IDX images. A task knows how to
// fill the micro-batch a rank reads at a step (a pure function of seed, step, micro-step, rank;
// runtime/data/batch_sampler.h), run the model forward and backward through ParameterAccess, and run a
// validation batch. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/comm/communicator.h"
#include "runtime/config/train_config.h"
#include "runtime/core/param_layout.h"
#include "runtime/core/parameter_access.h"
#include "runtime/core/part_placement.h"
#include "runtime/data/idx_data.h"
#include "common/process_grid.h"

namespace dslaunch::runtime {

// What a run trains on, read from the files named in the config's `data` section.
struct TrainData {
  std::vector<uint16_t> train;  // tokens (format "tokens")
  std::vector<uint16_t> val;    // may be empty: no validation
  IdxDataset train_images;      // format "idx"
  IdxDataset val_images;        // n == 0: no validation
};

// Reads the data files of `config` (token shards or IDX images and labels).
Result<TrainData> ReadTrainData(const TrainConfig& config);

// A run whose model is split into pipeline stages or over tensor ranks (docs/parallelism.md): the
// grid and this rank's groups (the caller's, alive for the run). The whole world is Train's
// communicator; the engine partitions over `data`, activations travel over `pipeline`, the split
// layers' sums over `tensor`.
struct ModelParallelRun {
  ProcessGrid grid;
  Communicator* pipeline = nullptr;
  Communicator* data = nullptr;
  Communicator* tensor = nullptr;
};

class TrainTask {
 public:
  // The task for config.model on `data`, for rank `rank` of `world`. Fails with
  // kInvalidArgument when the data does not fit the model (a token id past vocab_size, an image
  // size or label that does not fit the mlp, a training or validation shard too short for one
  // sample of data.seq_len + 1 tokens).
  static Result<std::unique_ptr<TrainTask>> Create(const TrainConfig& config, const TrainData& data, int rank,
                                                   int world);
  // The part of rank `rank` of `parallel`'s grid (gpt only): its stage's blocks, its tensor rank's
  // share of them, the micro-batches of its data-parallel copy.
  static Result<std::unique_ptr<TrainTask>> CreateStage(const TrainConfig& config, const TrainData& data, int rank,
                                                        const ModelParallelRun& parallel);
  virtual ~TrainTask() = default;

  virtual const ParameterLayout& layout() const = 0;
  virtual void InitParameters(std::span<float> flat, uint64_t seed) const = 0;
  // The same values a range at a time (runtime/core/initial_values.h).
  virtual void InitRange(size_t begin, std::span<float> out, uint64_t seed) const = 0;
  // "gpt" or "mlp".
  virtual std::string_view name() const = 0;
  // Whether the task classifies (mlp): validation then reports accuracy, and throughput is in
  // samples (images). A language model (gpt) is not one, whatever its seq_len, even 1.
  virtual bool classifier() const = 0;
  // Tokens per sample (seq_len) for gpt, 1 (an image) for mlp: throughput is GlobalBatch() x this
  // per step, in tokens or (a classifier) samples.
  virtual int64_t TokensPerSample() const = 0;
  // Model FLOPs per token (or image) for forward + backward, for MFU.
  virtual double FlopsPerToken() const = 0;
  // Bytes of the model's activation buffers for this rank's micro-batch (with recomputation, the
  // block inputs and the internals of the blocks that keep them).
  virtual size_t ActivationBytes() const = 0;
  // Samples in one optimizer step over all ranks.
  virtual int64_t GlobalBatch() const = 0;

  // Forward on this rank's micro-batch `micro_step` of `step`; returns the mean loss.
  virtual float ForwardTrain(ParameterAccess& params, int64_t step, int micro_step) = 0;
  // Backward of the last forward, the loss multiplied by `scale`.
  virtual void Backward(ParameterAccess& params, float scale) = 0;
  // The step's `micro_steps` forwards and backwards (each loss x `scale` in backward); returns the
  // sum of their losses. A pipeline stage runs its schedule (runtime/train/pipeline_stage.h) and
  // returns the losses on the last stage, 0 on the others.
  virtual Result<double> TrainMicroSteps(ParameterAccess& params, int64_t step, int micro_steps, float scale);
  // The sum of `batches` validation batches' mean losses (mlp: the rows right into *correct).
  // `after_batch` (optional) is called after each batch (the progress reporter's StillWorking).
  virtual Result<double> ValidationLossSum(ParameterAccess& params, int64_t batches, int64_t* correct,
                                           const std::function<void()>& after_batch);
  // Of `world` ranks, how many add a loss to the step's all-reduce: all, or the first tensor rank
  // of each last stage.
  virtual int LossRanks(int world) const { return world; }
  // Ranges of the layout every tensor rank holds whole (runtime/models/gpt.h, ReplicatedRanges);
  // empty without a tensor split.
  virtual std::vector<ShardRange> ReplicatedRanges() const { return {}; }
  // A model part (a pipeline stage's blocks, a tensor rank's share): the whole model's layout and
  // where the part lies in it, for checkpoints in the whole model's coordinates
  // (runtime/checkpoint/checkpoint.h). Null for a whole model.
  virtual const PartPlacement* placement() const { return nullptr; }
  // Whether there is validation data.
  virtual bool HasValidation() const = 0;
  // Forward on validation batch `batch` of this rank; returns the mean loss, and adds to
  // *correct the rows classified right (mlp; gpt leaves it).
  virtual float ForwardValidation(ParameterAccess& params, int64_t batch, int64_t* correct) = 0;
  // Rows per validation batch on this rank.
  virtual int ValidationRows() const = 0;
  // gpt: `count` tokens sampled after `prompt` (empty: "\n"), seeded; mlp: empty. A pipeline
  // stage samples with the other stages (collective over the pipeline group; every stage gets the
  // text) and fails as its messages do.
  virtual Result<std::string> Sample(ParameterAccess& params, const std::string& prompt, int count, uint64_t seed) = 0;

  // A micro-batch of tokens (rows x seq each), for a model that runs elsewhere than the task's own
  // (the device: runtime/train/device_training.h).
  struct TokenBatch {
    std::vector<int> tokens, targets;
    int rows = 0, seq = 0;
  };
  // This rank's micro-batch `micro_step` of `step`, the one ForwardTrain reads; and its validation
  // batch `batch`, ForwardValidation's. kFailedPrecondition for a task without token batches (mlp,
  // a model split into parts).
  virtual Result<TokenBatch> TrainBatch(int64_t step, int micro_step);
  virtual Result<TokenBatch> ValidationBatch(int64_t batch);
};

}  // namespace dslaunch::runtime
