// GptCuda<T>: the GPT-2 model of runtime/models/gpt.h on one CUDA device, forward and backward
// through the layer kernels of runtime/ops/cuda/ops.h, the same operations in the same order as
// GptModel::Forward and GptModel::Backward (docs/model.md), so that GptModel is its reference.
//
// Parameters: GptModel's ParameterLayout (the layout is taken from a GptModel of the same config, so
// names, order and offsets are the CPU's: a buffer initialised by GptModel::InitParameters and
// copied to the device is a valid model), reached group by group through DeviceParameterAccess
// (runtime/models/cuda/device_parameter_access.h) in GptModel's order of Acquire, Gradient and
// GradientReady calls, so that the device engine's ZeRO stages work as the CPU engine's do. The
// model never owns parameters or gradients.
//
// Element type T (float, __nv_bfloat16, __half; explicitly instantiated in gpt.cc): parameters,
// gradients and activations are stored in T, arithmetic is fp32 (the ops' convention). Side arrays
// keep their types: layer-norm statistics and per-row losses are float, tokens int. The tied
// token embedding gets its gradient from two places: the language-model head's matmul (in T,
// straight into the gradient buffer) and the embedding op (fp32 atomics), which adds straight into
// an fp32 gradient (GptModel's order: the head's term first) and otherwise into a float scratch of
// the model's, added into the gradient buffer once at the end of Backward.
//
// Activations live in device memory the model owns, sized at Create for max_batch x block_size
// tokens (all layers' internals are kept: no recomputation, so recompute_blocks must be 0).
//
// Streams and threads: every call enqueues on the stream it is given and returns without
// synchronizing, except MeanLoss, which synchronizes that stream. Forward and Backward of one step
// must run on one stream (or the caller orders them). Not thread-safe. The CublasLtContext given
// to Create must outlive the model and must not run matmuls on another stream concurrently
// (runtime/ops/cuda/cublaslt_context.h).
//
// Errors: every Status names "GptCuda::<call>", the layer where there is one, and the failing op
// (the ops' own messages, e.g. "GptCuda::Forward: h.3: LinearForward: cublasLtMatmul: ...").
// Errors of a kernel's execution surface at the next synchronization, as CUDA's do.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "common/status.h"
#include "runtime/core/param_layout.h"
#include "runtime/models/cuda/device_parameter_access.h"
#include "runtime/models/gpt.h"
#include "runtime/ops/cuda/cublaslt_context.h"

namespace dslaunch::runtime {

template <typename T>
class GptCuda {
 public:
  // Allocates the activations for max_batch x config.block_size tokens on the current device.
  // kInvalidArgument for a config ValidateGptConfig refuses, recompute_blocks != 0 or max_batch < 1;
  // kInternal naming the buffer and its size when cudaMalloc fails (nothing is kept then).
  static Result<std::unique_ptr<GptCuda>> Create(const GptConfig& config, int max_batch,
                                                 const ops::cuda::CublasLtContext& ctx);
  ~GptCuda();
  GptCuda(const GptCuda&) = delete;
  GptCuda& operator=(const GptCuda&) = delete;

  const GptConfig& config() const { return shape_.config(); }
  // The CPU model's layout (GptModel::layout()); the flat buffers of Forward/Backward follow it.
  const ParameterLayout& layout() const { return shape_.layout(); }
  // Device bytes Create allocated (activations, backward scratch, tokens).
  size_t activation_bytes() const { return activation_bytes_; }
  // GptModel::FlopsPerToken: model FLOPs per token of forward + backward at sequence length t.
  double FlopsPerToken(int t) const { return shape_.FlopsPerToken(t); }

  // Runs the model on tokens[b][t] against targets[b][t] (device ints, copied on the stream, so
  // the caller may reuse them once the stream has passed this call), with the parameters from
  // `params`, and keeps what Backward needs. Writes the per-row losses (losses(), b*t floats).
  // kInvalidArgument for b outside [1, max_batch], t outside [1, block_size] or a null pointer; a
  // token or target outside [0, vocab_size) gives NaN losses; a failed Acquire is returned.
  Status Forward(DeviceParameterAccess<T>& params, const int* tokens, const int* targets, int b, int t,
                 cudaStream_t stream);

  // Device array of the last Forward's per-row cross-entropies, b*t floats.
  const float* losses() const { return losses_; }
  // Device array of the last Forward's logits, [b*t][vocab_size] in T (for sampling).
  const T* logits() const { return logits_; }
  // The mean of the last Forward's per-row losses, as GptModel::Forward returns it (summed in
  // double on the host). Copies them to the host and synchronizes `stream`; kFailedPrecondition
  // before any Forward, kInternal naming the CUDA call on a copy error (which is where a failed
  // kernel of the step shows up).
  Result<float> MeanLoss(cudaStream_t stream) const;

  // Accumulates (+=) d(mean loss)/d(parameters) x loss_scale into params.Gradient(group) for the
  // last Forward, whose parameters must be unchanged, group by group from the head to the
  // embeddings, calling GradientReady after each. The access zeroes gradients at the start of a
  // step. kFailedPrecondition before any Forward; the access's failures are returned.
  Status Backward(DeviceParameterAccess<T>& params, float loss_scale, cudaStream_t stream);

 private:
  // A block's tensors, in layout order (as GptModel's); their offsets relative to the block's
  // group are the same for every block.
  enum BlockTensor { kLn1W, kLn1B, kAttnW, kAttnB, kProjW, kProjB, kLn2W, kLn2B, kFcW, kFcB, kFcProjW, kFcProjB,
                     kBlockTensors };
  // Block l's slots of the per-layer activation buffers.
  struct BlockActivations {
    T *ln1, *qkv, *att, *atty, *res2, *ln2, *fch, *fch_gelu;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;
  };

  GptCuda(const GptConfig& config, int max_batch, const ops::cuda::CublasLtContext& ctx);
  Status FindOffsets();
  Status AllocateAll();
  template <typename U>
  Status Allocate(U** out, size_t count, const char* name);
  BlockActivations Block(int l) const;
  Status BlockForward(const T* g, int l, cudaStream_t stream);
  Status BlockBackward(const T* g, T* dg, int l, cudaStream_t stream);

  GptModel shape_;  // a GptModel with no activations: the config, layout and FLOPs, one source of truth
  int max_batch_;
  const ops::cuda::CublasLtContext* ctx_;
  size_t block_offset_[kBlockTensors] = {};  // relative to the block's group
  size_t wpe_offset_ = 0;  // in group 0 (the embeddings), after wte at 0
  size_t lnf_offset_ = 0;  // ln_f.weight in the last group (ln_f.bias follows it)
  int b_ = 0, t_ = 0;  // of the last Forward; 0 before any

  std::vector<void*> allocations_;  // every cudaMalloc of Create, freed by the destructor
  size_t activation_bytes_ = 0;
  int *tokens_ = nullptr, *targets_ = nullptr;
  // x_: every block's input and the last block's output, (n_layer + 1) slots of N x C.
  T* x_ = nullptr;
  // Per-layer internals, n_layer slots each (strides: the max_batch x block_size sizes).
  T *ln1_ = nullptr, *qkv_ = nullptr, *att_ = nullptr, *atty_ = nullptr, *res2_ = nullptr, *ln2_ = nullptr,
    *fch_ = nullptr, *fch_gelu_ = nullptr;
  float *ln1_mean_ = nullptr, *ln1_rstd_ = nullptr, *ln2_mean_ = nullptr, *ln2_rstd_ = nullptr;
  // The head.
  T *lnf_ = nullptr, *logits_ = nullptr, *probs_ = nullptr;
  float *lnf_mean_ = nullptr, *lnf_rstd_ = nullptr, *losses_ = nullptr;
  // Backward scratch (activation gradients), reused by every layer.
  T *dx_ = nullptr, *dres_ = nullptr, *dtmp_c_ = nullptr, *dtmp_c2_ = nullptr, *dqkv_ = nullptr, *dfch_ = nullptr,
    *dfch_gelu_ = nullptr, *dlnf_ = nullptr, *dlogits_ = nullptr, *att_scratch_ = nullptr;
  // The embedding op's float gradients of group 0 (wte then wpe, as in the layout); T = float
  // adds them straight into the gradient and has none.
  float* demb_ = nullptr;
};

}  // namespace dslaunch::runtime
