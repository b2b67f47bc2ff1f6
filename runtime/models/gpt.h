// GptModel: the GPT-2 architecture (learned position embeddings, pre-norm blocks of causal
// self-attention and a GELU MLP, final layer norm, language-model head tied to the token
// embedding), forward and backward on CPU in fp32 through runtime/ops/cpu/ops.h.
//
// Parameters live outside the model, in the engine's flat buffers, reached group by group through
// ParameterAccess (group 0: wte, wpe; group 1+l: block l; group 1+n_layer: ln_f). Names follow
// Hugging Face's GPT-2 checkpoint ("h.0.attn.c_attn.weight"); linear weights are [out][in].
// Activations are owned by the model and sized for at most max_batch x block_size tokens. With
// recomputation (activation checkpointing, docs/engine.md "Recomputation") the first
// `recompute_blocks` blocks keep only their input after Forward; Backward runs each one's forward
// again just before its backward, into one shared set of block buffers, so the result is bitwise
// the same and the activations take the block inputs plus one block's internals.
//
// A GptModel may hold a part of the model, a pipeline stage's blocks (GptPart; docs/parallelism.md,
// "Stages"): its layout then has only the part's groups, it reads an input activation instead of
// tokens unless it holds the first block, and it ends with an output activation instead of the
// loss unless it holds the last. The last part without the first keeps no copy of the tied token
// embedding: the head reads the values and adds its gradient where SetTiedHead says (the pipeline
// brings wte's values from the first stage and takes the gradient back to it). Parameter values
// and every result are those of the same tensors in the whole model.
//
// A part may also be one tensor rank's share (GptPart::tensor_size > 1; Megatron-LM's split,
// docs/parallelism.md "Tensor parallelism"): each attention's heads and the MLP's hidden units
// split column-wise (c_attn, c_fc: the rank's rows of the weight and bias) and row-wise (the two
// c_proj: the rank's columns), the token embedding and the head by rows of the vocabulary. The
// other tensors (layer norms, wpe, the c_proj biases) are whole on every rank, with the same
// values and gradients everywhere. The group's sums (TensorGroup, set by SetTensorGroup) finish
// each c_proj's product, the embedding, and the input gradients of c_attn, c_fc and the head; a
// maximum and two sums make the cross-entropy over the split vocabulary.
// Not thread-safe; Forward then Backward, once per micro-step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "runtime/core/param_layout.h"
#include "runtime/core/parameter_access.h"
#include "runtime/core/part_placement.h"
#include "runtime/core/partition.h"
#include "runtime/models/tensor_group.h"

namespace dslaunch::runtime {

// The `gpt` model of train.json, typed; the parser fills it directly (docs/train-json.md).
struct GptConfig {
  int n_layer = 0;
  int n_head = 0;
  int n_embd = 0;
  int block_size = 0;  // the longest sequence (position embeddings)
  int vocab_size = 0;
  // Activation checkpointing: how many blocks, from the first, are recomputed in Backward instead
  // of keeping their internal activations (0: none, n_layer: every block). 0 <= it <= n_layer.
  int recompute_blocks = 0;
};

// Bounds of a GptConfig: values past them are mistakes, not models (whether a model within them
// fits the machine is the memory check's question, runtime/train/memory_estimate.h).
// 4x the deepest transformer trained (DeepNet, 1,000 layers); the layout then names ~50,000 tensors.
inline constexpr int kMaxGptLayers = 4096;
// 2.5x the widest published GPT (25,600); one c x 4c weight is then 64 GiB. Bounds n_head too.
inline constexpr int kMaxGptEmbedding = 65536;
// The model keeps every head's T x T attention matrix: 16 GiB for one head of one layer of one
// sequence at 65,536 tokens; longer contexts need another attention algorithm.
inline constexpr int kMaxGptBlockSize = 65536;
// Token ids are stored as uint16 in llm.c shards.
inline constexpr int kMaxGptVocabSize = 65536;

// The one check of GptConfig (the parser calls it): every field in [1, its bound above] and n_embd
// divisible by n_head. kInvalidArgument whose message starts with the train.json key,
// "model.<key>: ".
Status ValidateGptConfig(const GptConfig& config);

// Whether the model splits over `tensor_size` tensor ranks: n_head divisible by it (each rank a
// whole number of heads), and no more ranks than rows of the vocabulary. kInvalidArgument naming
// tensor_parallel.autotp_size and the model key.
Status ValidateGptTensorSplit(const GptConfig& config, int tensor_size);

// Blocks [first_block, end_block) of the model (end_block -1: to the last block), and of every
// split tensor the share of tensor rank `tensor_rank` of `tensor_size` (1: whole tensors).
struct GptPart {
  int first_block = 0;
  int end_block = -1;
  int tensor_rank = 0;
  int tensor_size = 1;
};

class GptModel {
 public:
  // Preconditions (checked): the part is a non-empty run of the config's blocks; a tensor split
  // ValidateGptTensorSplit accepts, and tensor_rank in [0, tensor_size). max_batch 0 makes a model
  // for its layout only (no activations; it must not run).
  GptModel(const GptConfig& config, int max_batch, GptPart part = {});

  // The tensor group of a split part (size tensor_size, this rank tensor_rank; checked), alive
  // while the model runs. Required before the first Forward of a split part.
  void SetTensorGroup(TensorGroup& group);
  // OK, or the first failure of the tensor group's collectives: Forward's and Backward's results
  // are meaningless after one (the caller checks after each).
  const Status& status() const { return status_; }
  // The rows of the vocabulary this part's wte and logits hold: [vocab_begin, vocab_end).
  int vocab_begin() const { return static_cast<int>(widths_.vocab.begin); }
  int vocab_end() const { return static_cast<int>(widths_.vocab.end); }
  // Ranges of the layout held whole on every tensor rank, with the same gradients on each (empty
  // without a split): a norm over the group counts them once.
  std::vector<ShardRange> ReplicatedRanges() const;
  // Where this part's flat buffer lies in the whole model's (the layout of GptModel(config, 0)):
  // its tensors' slices in layout order, merged (runtime/core/part_placement.h). The whole model
  // is one piece.
  std::vector<WholePiece> WholePieces() const;

  // What a model of `config` holds, computed without building it (the memory check before
  // allocating, runtime/train/memory_estimate.h). Doubles: a hostile config's products pass 2^64.
  // Parameters: layout().numel(). Groups: the elements of each parameter group, in layout order.
  // Groups: those of `part`.
  static double NumParameters(const GptConfig& config);
  static std::vector<double> GroupSizes(const GptConfig& config, GptPart part = {});
  // Bytes of the activations and scratch gradients the constructor allocates for max_batch
  // (docs/engine.md, "Recomputation", gives the formula).
  static double ActivationBytes(const GptConfig& config, int max_batch, GptPart part = {});
  // Sets of block-internal buffers the model keeps: its blocks without recomputation, else one
  // shared by the recomputed blocks (the part's first recompute_blocks) plus one per other block.
  static int BlockSlots(const GptConfig& config, GptPart part = {});
  // The same, measured on this model's buffers.
  size_t activation_bytes() const;

  const GptConfig& config() const { return config_; }
  const ParameterLayout& layout() const { return layout_; }
  // Whether the part holds the embeddings (the model's first block) and the head (its last).
  bool first() const { return first_block_ == 0; }
  bool last() const { return end_block_ == config_.n_layer; }

  // GPT-2's initialisation into the full flat buffer (size layout().numel()): weights N(0, 0.02),
  // residual projections scaled by 1/sqrt(2 n_layer), position embeddings N(0, 0.01), biases 0,
  // layer-norm weights 1. Deterministic for a seed.
  void InitParameters(std::span<float> flat, uint64_t seed) const;
  // The same values' range [begin, begin + out.size()), computed without the others (the engine
  // fills its stores a range at a time: runtime/core/initial_values.h).
  void InitRange(size_t begin, std::span<float> out, uint64_t seed) const;

  // Runs the model on tokens[b][t] (t <= block_size, b <= max_batch) and returns the mean
  // cross-entropy against targets[b][t]. Keeps what Backward needs. The whole model only.
  float Forward(ParameterAccess& params, const int* tokens, const int* targets, int b, int t);
  // Accumulates d(mean loss)/d(parameters) x loss_scale into params.Gradient(group), group by
  // group from the last block to the embeddings, calling GradientReady after each.
  void Backward(ParameterAccess& params, float loss_scale);

  // A part's forward: from tokens (the first part) or `input`, [b*t][n_embd]; to the mean loss
  // against targets (the last part; others return 0 and leave output()).
  float ForwardPart(ParameterAccess& params, const int* tokens, const float* input, const int* targets, int b, int t);
  // The last ForwardPart's output activation, [b*t][n_embd] (a part without the head).
  std::span<const float> output() const;
  // A part's backward, from the loss (the last part) or from `output_gradient`, the gradient of
  // output() x loss_scale. Gradients as Backward.
  void BackwardPart(ParameterAccess& params, float loss_scale, const float* output_gradient);
  // After BackwardPart of a part without the embeddings: the gradient of its input x loss_scale.
  std::span<const float> input_gradient() const;
  // The token embedding the head of a last part without the first one reads, and where it adds its
  // gradient ([vocab_size][n_embd] each, the caller's, alive while the model runs).
  void SetTiedHead(std::span<const float> weight, std::span<float> gradient);

  // The logits of the last Forward's rows, [b*t][vocab_end - vocab_begin] (for sampling).
  std::span<const float> logits() const { return logits_; }

  // Model FLOPs per token for forward + backward (6 x matmul parameters + attention), for MFU.
  double FlopsPerToken(int t) const { return FlopsPerToken(config_, t); }
  static double FlopsPerToken(const GptConfig& config, int t);

 private:
  // A block's tensors, in layout order; their offsets relative to the block's group are the same
  // for every block.
  enum BlockTensor { kLn1W, kLn1B, kAttnW, kAttnB, kProjW, kProjB, kLn2W, kLn2B, kFcW, kFcB, kFcProjW, kFcProjB,
                     kBlockTensors };
  // Where block l's internal activations live for the current b x t: its slot of each buffer.
  struct BlockActivations {
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *att, *atty, *res2, *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu;
  };
  // A split part's widths: heads, the attention's and the MLP's hidden units, the vocabulary rows.
  struct Widths {
    int heads = 0, attn = 0, mlp = 0;
    ShardRange vocab;
  };
  static Widths WidthsOf(const GptConfig& config, GptPart part);
  // A tensor's elements in the whole model's tensor: `count` runs of `run` values, run k starting
  // at start + k x stride (a row slice is one run; a column slice one run per row).
  struct Slice {
    size_t start = 0, stride = 0, run = 0, count = 1;
  };
  // The tensor group's sum (max) in place, without a split nothing; the first failure is kept in
  // status_.
  void GroupSum(float* data, size_t count) { GroupReduce(&TensorGroup::Sum, data, count); }
  void GroupMax(float* data, size_t count) { GroupReduce(&TensorGroup::Max, data, count); }
  void GroupReduce(Status (TensorGroup::*op)(std::span<float>), float* data, size_t count);
  bool split() const { return tensor_size_ > 1; }
  void BuildLayout();
  // Group indices in this part's layout (-1 where the part has none).
  int EmbeddingGroup() const { return first() ? 0 : -1; }
  int BlockGroup(int local) const { return (first() ? 1 : 0) + local; }
  int FinalNormGroup() const { return last() ? BlockGroup(blocks_) : -1; }
  // The head: logits from the final norm's output, and its gradient back into dlnf_.
  void HeadForward(ParameterAccess& params);
  void HeadBackward(ParameterAccess& params, float loss_scale);
  BlockActivations Block(int l);
  // Block l's forward from x_[l] with the block's parameters `g`: the internals into its slot, and
  // with `output` the block's output into x_[l + 1] (a recomputation does not need it).
  void BlockForward(const float* g, int l, bool output);

  GptConfig config_;
  int max_batch_;
  int first_block_ = 0, end_block_ = 0, blocks_ = 0;  // the part: model blocks [first, end)
  int recompute_ = 0;  // the part's first blocks recomputed in backward
  // Per layout tensor: the seed stream's state before its first draw in the whole model, and its
  // standard deviation (0 for the constants: layer-norm weights 1, biases 0).
  struct TensorInit {
    uint64_t state_offset = 0;  // draws before the tensor's first, in the whole model's stream
    float stddev = 0;
    float constant = 0;
    Slice slice;  // where its values lie in the whole model's tensor
    bool replicated = true;  // whole on every tensor rank
    size_t whole_offset = 0;  // the whole tensor's offset in the whole model's flat buffer
  };
  std::vector<TensorInit> init_;
  int tensor_rank_ = 0, tensor_size_ = 1;
  Widths widths_;  // this rank's heads, attention and MLP widths, rows of the vocabulary
  TensorGroup* tensor_group_ = nullptr;
  Status status_;
  std::span<const float> tied_weight_;  // a last part's head without the embeddings
  std::span<float> tied_gradient_;
  ParameterLayout layout_;
  size_t block_offset_[kBlockTensors] = {};  // group-relative
  size_t wpe_offset_ = 0;                    // relative to group 0 (wte is at 0)
  int b_ = 0, t_ = 0;
  std::vector<int> tokens_, targets_;
  // Activations: per layer, and the final ones.
  std::vector<float> x_, ln1_, ln1_mean_, ln1_rstd_, qkv_, att_, atty_, res2_, ln2_, ln2_mean_, ln2_rstd_, fch_,
      fch_gelu_;
  std::vector<float> lnf_, lnf_mean_, lnf_rstd_, logits_, probs_, losses_;
  // A split head: each row's maximum and sum over the vocabulary, and the targets in its rows.
  std::vector<float> row_max_, row_sum_;
  std::vector<int> local_targets_;
  // Scratch gradients of activations for the backward pass.
  std::vector<float> dx_, dtmp_c_, dtmp_c2_, dqkv_, dfch_, dfch_gelu_, dlnf_, dlogits_;
};

}  // namespace dslaunch::runtime
