// CPU forward and backward kernels of the bundled models' layers, fp32, on flat row-major arrays
// with explicit shapes (B batch, T sequence, C channels, NH heads, V vocabulary, N = B*T rows).
//
// Conventions, the same for every op:
//  - Forward writes its outputs (and any cache the backward needs); it never accumulates.
//  - Backward ACCUMULATES (+=) into every gradient it produces (input and parameter gradients), so
//    gradient accumulation over micro-steps and branches (residuals, tied embeddings) needs no
//    extra buffers. Callers zero gradients at the start of a step. Where an input gradient is
//    the first thing written to its buffer, GradMode::kSet overwrites it instead, which saves
//    zeroing the buffer beforehand (the same values: 0 + x is x).
//  - Weights follow PyTorch's nn.Linear layout: weight[out][in].
// Matrix products use OpenBLAS sgemm; elementwise loops are written for GCC's vectorizer (exp and
// tanh through SimdExp, runtime/ops/cpu/simd_exp.h), the elementwise and row kernels compiled for
// AVX-512 and AVX2 as well (common/simd_clones.h; row sums in a width-independent order,
// lane_sum.h), and parallelised with OpenMP where rows are independent. The fused forms below do in one pass after the sgemm what two ops would do in two,
// with the same arithmetic in the same order, so the same bits (tests/runtime/ops/cpu/fused_test.cc).
// Every backward is checked against finite differences in tests/runtime/ops/cpu/ops_test.cc,
// the forwards against double references in tests/runtime/ops/cpu/ops_reference_test.cc.
// Formulas: docs/model.md.
#pragma once

namespace dslaunch::runtime::ops {

// Below this many elements a loop runs on one thread: starting an OpenMP team costs more than the
// work (a tiny test model ran 15x slower with two threads than with one).
inline constexpr long kParallelMinElements = 1L << 15;

// Whether a backward adds its input gradient to `din` (kAdd, the convention) or overwrites it.
enum class GradMode { kAdd, kSet };

// out[N][out_dim] = in[N][in_dim] * weight[out_dim][in_dim]^T + bias[out_dim] (bias may be null).
void LinearForward(float* out, const float* in, const float* weight, const float* bias, int n, int in_dim,
                   int out_dim);
// din += dout * weight (din = with kSet); dweight += dout^T * in; dbias += column sums of dout (each
// may be null).
void LinearBackward(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                    const float* weight, int n, int in_dim, int out_dim, GradMode din_mode = GradMode::kAdd);

// Fused (runtime/ops/cpu/fused.cc):
// LinearForward then GELU: pre = in * weight^T + bias (kept: the GELU backward's input), out =
// GELU(pre).
void LinearGeluForward(float* pre, float* out, const float* in, const float* weight, const float* bias, int n,
                       int in_dim, int out_dim);
// LinearForward plus a residual: out = (in * weight^T + bias) + residual[N][out_dim].
void LinearResidualForward(float* out, const float* in, const float* weight, const float* bias,
                           const float* residual, int n, int in_dim, int out_dim);
// GELU's backward and the bias gradient of the linear layer that produced its input: din =
// GELU'(in) * dout (overwritten, kSet), dbias[cols] += column sums of din, rows in order.
void GeluBackwardBias(float* din, float* dbias, const float* dout, const float* in, int n, int cols);

// Layer norm over the last dimension C: out = (x - mean) * rstd * weight + bias, with rstd =
// 1/sqrt(var + kLayerNormEps). mean[N] and rstd[N] are saved for the backward.
inline constexpr float kLayerNormEps = 1e-5f;
void LayerNormForward(float* out, float* mean, float* rstd, const float* in, const float* weight,
                      const float* bias, int n, int c);
void LayerNormBackward(float* din, float* dweight, float* dbias, const float* dout, const float* in,
                       const float* weight, const float* mean, const float* rstd, int n, int c);

// GELU, tanh approximation (GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void GeluForward(float* out, const float* in, long count);
void GeluBackward(float* din, const float* dout, const float* in, long count);

// out[b][t][:] = wte[tokens[b][t]][:] + wpe[t][:] (wpe may be null: no position embedding).
void EmbeddingForward(float* out, const int* tokens, const float* wte, const float* wpe, int b, int t, int c);
void EmbeddingBackward(float* dwte, float* dwpe, const float* dout, const int* tokens, int b, int t, int c);

// Causal multi-head self-attention. qkv[N][3C] holds q, k, v (C each, heads of C/NH); out[N][C].
// att[B][NH][T][T] saves the softmax probabilities for the backward (entries above the diagonal 0).
// Both directions are sgemm calls per (batch, head) on blocks of 64 query rows that skip the
// masked upper triangle, sequential over (batch, head); the backward allocates one [T][T] scratch.
void AttentionForward(float* out, float* att, const float* qkv, int b, int t, int c, int nh);
void AttentionBackward(float* dqkv, const float* dout, const float* qkv, const float* att, int b, int t,
                       int c, int nh);

// Softmax cross-entropy per row: probs[N][V] = softmax(logits), losses[N] = -log probs[target].
void CrossEntropyForward(float* losses, float* probs, const float* logits, const int* targets, int n, int v);
// dlogits += (probs - onehot(target)) * dloss (dloss per row, e.g. 1/N for a mean loss).
void CrossEntropyBackward(float* dlogits, const float* probs, const int* targets, float dloss, int n, int v);

// Tensor parallelism (runtime/ops/cpu/tensor_parallel.cc; docs/parallelism.md, "Tensor
// parallelism"): a rank holds rows [row_begin, row_end) of the vocabulary; the sums and maxima
// over the tensor group between these steps are the caller's.
// out[N][C] = wte_rows[token - row_begin] for the rank's tokens, 0 for the others (summed over the
// group, each row is its token's embedding, exactly).
void EmbeddingRowsForward(float* out, const int* tokens, const float* wte_rows, int row_begin, int row_end, int n,
                          int c);
// out[b][t][:] += wpe[t][:].
void AddPositionEmbedding(float* out, const float* wpe, int b, int t, int c);
// dwte_rows[token - row_begin] += dout for the rank's tokens; dwpe[t] += dout for every row.
void EmbeddingRowsBackward(float* dwte_rows, float* dwpe, const float* dout, const int* tokens, int row_begin,
                           int row_end, int b, int t, int c);
// out[N][C] = (out + bias) + residual, in place: a row-parallel layer's summed partial products
// finished as LinearResidualForward finishes its own.
void BiasResidualForward(float* out, const float* bias, const float* residual, int n, int c);
// The softmax cross-entropy over a vocabulary split into rows, in three passes with a maximum and
// two sums over the group between them: (1) row_max[N] = the rank's maximum logit of each row;
// the caller takes the maximum over the group. (2) probs[N][V] = exp(logit -
// row_max), row_sum[N] = their sum; the caller sums row_sum over the group. (3) probs /= row_sum,
// losses[N] = -log probs[target] where the rank holds the target, else 0; the caller sums losses
// over the group. CrossEntropyBackward then takes targets - row_begin (outside [0, V): no one-hot).
void SplitSoftmaxMax(float* row_max, const float* logits, int n, int v);
void SplitSoftmaxExp(float* row_sum, float* probs, const float* logits, const float* row_max, int n, int v);
void SplitCrossEntropyForward(float* losses, float* probs, const float* row_sum, const int* targets, int row_begin,
                              int n, int v);

// ReLU: out = max(x, 0). The backward passes dout where the saved input was > 0 (the subgradient
// at exactly 0 is taken as 0, as PyTorch does).
void ReluForward(float* out, const float* in, long count);
void ReluBackward(float* din, const float* dout, const float* in, long count);

}  // namespace dslaunch::runtime::ops
