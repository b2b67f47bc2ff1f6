#include "runtime/models/cuda/gpt.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

#include "runtime/ops/cuda/cuda_status.h"
#include "runtime/ops/cuda/ops.h"
#include "runtime/ops/cuda/ops.h"

namespace dslaunch::runtime {
namespace {

namespace cu = ops::cuda;

// The tensors of a block in GptModel's order (its BlockTensor enum), named as its layout names
// them after the "h.<l>." prefix.
constexpr const char* kBlockTensorNames[] = {
    "ln_1.weight", "ln_1.bias",     "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
    "ln_2.weight", "ln_2.bias",     "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};

std::string LayerName(int l) { return "h." + std::to_string(l); }

template <typename U>
Status Zero(U* p, size_t count, cudaStream_t stream, const char* what) {
  return cu::CudaStatus(cudaMemsetAsync(p, 0, count * sizeof(U), stream), "cudaMemsetAsync", what);
}

template <typename U>
Status CopyOnDevice(U* to, const U* from, size_t count, cudaStream_t stream, const char* what) {
  return cu::CudaStatus(cudaMemcpyAsync(to, from, count * sizeof(U), cudaMemcpyDeviceToDevice, stream),
                        "cudaMemcpyAsync", what);
}

// A group acquired for the scope of one use: released however the scope is left.
template <typename T>
class Acquired {
 public:
  explicit Acquired(DeviceParameterAccess<T>& params, int group) : params_(params), group_(group) {
    Result<const T*> p = params.Acquire(group);
    status_ = p.status();
    if (p.ok()) data_ = *p;
  }
  ~Acquired() {
    if (status_.ok()) params_.Release(group_);
  }
  Acquired(const Acquired&) = delete;
  Acquired& operator=(const Acquired&) = delete;
  const Status& status() const { return status_; }
  const T* data() const { return data_; }

 private:
  DeviceParameterAccess<T>& params_;
  int group_;
  Status status_;
  const T* data_ = nullptr;
};

}  // namespace

template <typename T>
GptCuda<T>::GptCuda(const GptConfig& config, int max_batch, const ops::cuda::CublasLtContext& ctx)
    : shape_(config, /*max_batch=*/0), max_batch_(max_batch), ctx_(&ctx) {}

template <typename T>
GptCuda<T>::~GptCuda() {
  // cudaFree's errors cannot be acted on here (a sticky error from earlier work is reported by
  // the calls that met it).
  for (void* p : allocations_) (void)cudaFree(p);
}

template <typename T>
Result<std::unique_ptr<GptCuda<T>>> GptCuda<T>::Create(const GptConfig& config, int max_batch,
                                                       const ops::cuda::CublasLtContext& ctx) {
  constexpr char kOp[] = "GptCuda::Create";
  DSLAUNCH_RETURN_IF_ERROR(ValidateGptConfig(config).WithContext(kOp));
  if (config.recompute_blocks != 0) {
    return InvalidArgumentError(std::string(kOp) + ": recompute_blocks " + std::to_string(config.recompute_blocks) +
                                " is not supported on the device (every block keeps its activations)");
  }
  // The ops take row counts as int: max_batch x block_size rows must fit one.
  if (max_batch < 1 || max_batch > INT_MAX / config.block_size) {
    return InvalidArgumentError(std::string(kOp) + ": max_batch " + std::to_string(max_batch) + " outside [1, " +
                                std::to_string(INT_MAX / config.block_size) + "]");
  }
  std::unique_ptr<GptCuda> model(new GptCuda(config, max_batch, ctx));
  DSLAUNCH_RETURN_IF_ERROR(model->FindOffsets().WithContext(kOp));
  DSLAUNCH_RETURN_IF_ERROR(model->AllocateAll().WithContext(kOp));
  return Result<std::unique_ptr<GptCuda>>(std::move(model));
}

template <typename T>
Status GptCuda<T>::FindOffsets() {
  const ParameterLayout& layout = shape_.layout();
  const GptConfig& cfg = shape_.config();
  auto find = [&](const std::string& name, size_t* offset) -> Status {
    const TensorInfo* info = layout.Find(name);
    if (info == nullptr) return InternalError("GptModel's layout has no tensor '" + name + "'");
    *offset = info->offset;
    return Status::Ok();
  };
  size_t wte = 0, wpe = 0, lnf = 0, lnf_bias = 0;
  DSLAUNCH_RETURN_IF_ERROR(find("wte.weight", &wte));
  DSLAUNCH_RETURN_IF_ERROR(find("wpe.weight", &wpe));
  DSLAUNCH_RETURN_IF_ERROR(find("ln_f.weight", &lnf));
  DSLAUNCH_RETURN_IF_ERROR(find("ln_f.bias", &lnf_bias));
  // The embeddings are group 0, wte first and wpe right after it (Backward adds the embedding op's
  // float gradients of both as one range); ln_f's bias follows its weight in the last group.
  const size_t c = cfg.n_embd;
  const size_t last_group = layout.groups().back().offset;
  if (wte != 0 || wpe != static_cast<size_t>(cfg.vocab_size) * c || lnf < last_group || lnf_bias != lnf + c) {
    return InternalError("GptModel's layout no longer has wte then wpe first and ln_f.weight then ln_f.bias last");
  }
  wpe_offset_ = wpe;
  lnf_offset_ = lnf - last_group;
  const size_t block0 = layout.groups()[1].offset;
  for (int k = 0; k < kBlockTensors; ++k) {
    size_t offset = 0;
    DSLAUNCH_RETURN_IF_ERROR(find(std::string("h.0.") + kBlockTensorNames[k], &offset));
    block_offset_[k] = offset - block0;
  }
  return Status::Ok();
}

template <typename T>
template <typename U>
Status GptCuda<T>::Allocate(U** out, size_t count, const char* name) {
  void* p = nullptr;
  const size_t bytes = count * sizeof(U);
  const std::string what = std::string(name) + " (" + std::to_string(bytes) + " bytes)";
  DSLAUNCH_RETURN_IF_ERROR(cu::CudaStatus(cudaMalloc(&p, bytes), "cudaMalloc", what));
  allocations_.push_back(p);
  activation_bytes_ += bytes;
  *out = static_cast<U*>(p);
  return Status::Ok();
}

template <typename T>
Status GptCuda<T>::AllocateAll() {
  const GptConfig& cfg = shape_.config();
  const size_t n = static_cast<size_t>(max_batch_) * cfg.block_size;
  const size_t c = cfg.n_embd, l = cfg.n_layer, v = cfg.vocab_size, nh = cfg.n_head;
  const size_t nc = n * c;
  const size_t att = static_cast<size_t>(max_batch_) * nh * cfg.block_size * cfg.block_size;
  const struct {
    T** out;
    size_t count;
    const char* name;
  } t_buffers[] = {
      {&x_, (l + 1) * nc, "x"},          {&ln1_, l * nc, "ln1"},           {&qkv_, l * 3 * nc, "qkv"},
      {&att_, l * att, "att"},           {&atty_, l * nc, "atty"},         {&res2_, l * nc, "res2"},
      {&ln2_, l * nc, "ln2"},            {&fch_, l * 4 * nc, "fch"},       {&fch_gelu_, l * 4 * nc, "fch_gelu"},
      {&lnf_, nc, "lnf"},                {&logits_, n * v, "logits"},      {&probs_, n * v, "probs"},
      {&dx_, nc, "dx"},                  {&dres_, nc, "dres"},             {&dtmp_c_, nc, "dtmp_c"},
      {&dtmp_c2_, nc, "dtmp_c2"},        {&dqkv_, 3 * nc, "dqkv"},         {&dfch_, 4 * nc, "dfch"},
      {&dfch_gelu_, 4 * nc, "dfch_gelu"}, {&dlnf_, nc, "dlnf"},            {&dlogits_, n * v, "dlogits"},
      {&att_scratch_, static_cast<size_t>(cu::AttentionBackwardScratchElements(cfg.block_size, cfg.n_head)),
       "attention backward scratch"}};
  for (const auto& b : t_buffers) DSLAUNCH_RETURN_IF_ERROR(Allocate(b.out, b.count, b.name));
  const struct {
    float** out;
    size_t count;
    const char* name;
  } f_buffers[] = {{&ln1_mean_, l * n, "ln1_mean"}, {&ln1_rstd_, l * n, "ln1_rstd"}, {&ln2_mean_, l * n, "ln2_mean"},
                   {&ln2_rstd_, l * n, "ln2_rstd"}, {&lnf_mean_, n, "lnf_mean"},     {&lnf_rstd_, n, "lnf_rstd"},
                   {&losses_, n, "losses"}};
  for (const auto& b : f_buffers) DSLAUNCH_RETURN_IF_ERROR(Allocate(b.out, b.count, b.name));
  if constexpr (!std::is_same_v<T, float>) {
    DSLAUNCH_RETURN_IF_ERROR(Allocate(&demb_, (v + cfg.block_size) * c, "embedding gradient scratch"));
  }
  DSLAUNCH_RETURN_IF_ERROR(Allocate(&tokens_, n, "tokens"));
  return Allocate(&targets_, n, "targets");
}

template <typename T>
typename GptCuda<T>::BlockActivations GptCuda<T>::Block(int l) const {
  // Slots are strided by the max_batch x block_size sizes, whatever this step's b x t.
  const GptConfig& cfg = shape_.config();
  const size_t n = static_cast<size_t>(max_batch_) * cfg.block_size, nc = n * cfg.n_embd;
  const size_t att = static_cast<size_t>(max_batch_) * cfg.n_head * cfg.block_size * cfg.block_size;
  const size_t i = l;
  return {ln1_ + i * nc,      qkv_ + i * 3 * nc,      att_ + i * att,      atty_ + i * nc,
          res2_ + i * nc,     ln2_ + i * nc,          fch_ + i * 4 * nc,   fch_gelu_ + i * 4 * nc,
          ln1_mean_ + i * n,  ln1_rstd_ + i * n,      ln2_mean_ + i * n,   ln2_rstd_ + i * n};
}

template <typename T>
Status GptCuda<T>::BlockForward(const T* g, int l, cudaStream_t stream) {
  const GptConfig& cfg = shape_.config();
  const int b = b_, t = t_, n = b * t, c = cfg.n_embd, nh = cfg.n_head;
  const long nc = static_cast<long>(n) * c;
  const size_t x_stride = static_cast<size_t>(max_batch_) * cfg.block_size * c;
  auto w = [&](BlockTensor k) { return g + block_offset_[k]; };
  const BlockActivations a = Block(l);
  const T* x = x_ + l * x_stride;
  T* x_next = x_ + (l + 1) * x_stride;
  DSLAUNCH_RETURN_IF_ERROR(cu::LayerNormForward(a.ln1, a.ln1_mean, a.ln1_rstd, x, w(kLn1W), w(kLn1B), n, c, stream));
  DSLAUNCH_RETURN_IF_ERROR(cu::LinearForward(*ctx_, a.qkv, a.ln1, w(kAttnW), w(kAttnB), n, c, 3 * c, stream));
  DSLAUNCH_RETURN_IF_ERROR(cu::AttentionForward(*ctx_, a.atty, a.att, a.qkv, b, t, c, nh, stream));
  DSLAUNCH_RETURN_IF_ERROR(cu::LinearForward(*ctx_, a.res2, a.atty, w(kProjW), w(kProjB), n, c, c, stream));
  DSLAUNCH_RETURN_IF_ERROR(cu::ResidualAdd(a.res2, x, nc, stream));
  DSLAUNCH_RETURN_IF_ERROR(
      cu::LayerNormForward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, w(kLn2W), w(kLn2B), n, c, stream));
  DSLAUNCH_RETURN_IF_ERROR(cu::LinearForward(*ctx_, a.fch, a.ln2, w(kFcW), w(kFcB), n, c, 4 * c, stream));
  DSLAUNCH_RETURN_IF_ERROR(cu::GeluForward(a.fch_gelu, a.fch, 4 * nc, stream));
  DSLAUNCH_RETURN_IF_ERROR(
      cu::LinearForward(*ctx_, x_next, a.fch_gelu, w(kFcProjW), w(kFcProjB), n, 4 * c, c, stream));
  return cu::ResidualAdd(x_next, a.res2, nc, stream);
}

template <typename T>
Status GptCuda<T>::Forward(DeviceParameterAccess<T>& params, const int* tokens, const int* targets, int b, int t,
                           cudaStream_t stream) {
  constexpr char kOp[] = "GptCuda::Forward";
  const GptConfig& cfg = shape_.config();
  if (b < 1 || b > max_batch_ || t < 1 || t > cfg.block_size) {
    return InvalidArgumentError(std::string(kOp) + ": batch " + std::to_string(b) + "x" + std::to_string(t) +
                                " outside 1.." + std::to_string(max_batch_) + " x 1.." +
                                std::to_string(cfg.block_size));
  }
  if (tokens == nullptr || targets == nullptr) return InvalidArgumentError(std::string(kOp) + ": null pointer");
  b_ = 0, t_ = 0;  // no Backward after a Forward that failed half-way
  const int n = b * t, c = cfg.n_embd, v = cfg.vocab_size, L = cfg.n_layer;
  const size_t x_stride = static_cast<size_t>(max_batch_) * cfg.block_size * c;
  DSLAUNCH_RETURN_IF_ERROR(CopyOnDevice(tokens_, tokens, n, stream, "tokens").WithContext(kOp));
  DSLAUNCH_RETURN_IF_ERROR(CopyOnDevice(targets_, targets, n, stream, "targets").WithContext(kOp));
  b_ = b, t_ = t;
  Status s = [&] {
    Acquired<T> emb(params, 0);
    DSLAUNCH_RETURN_IF_ERROR(emb.status());
    return cu::EmbeddingForward(x_, tokens_, emb.data(), emb.data() + wpe_offset_, b, t, c, v, stream);
  }();
  if (!s.ok()) {
    b_ = 0;
    return s.WithContext(std::string(kOp) + ": embeddings");
  }
  for (int l = 0; l < L; ++l) {
    s = [&] {
      Acquired<T> block(params, 1 + l);
      DSLAUNCH_RETURN_IF_ERROR(block.status());
      return BlockForward(block.data(), l, stream);
    }();
    if (!s.ok()) {
      b_ = 0;
      return s.WithContext(std::string(kOp) + ": " + LayerName(l));
    }
  }
  s = [&] {
    {
      Acquired<T> lnf(params, 1 + L);
      DSLAUNCH_RETURN_IF_ERROR(lnf.status());
      const T* w = lnf.data() + lnf_offset_;
      DSLAUNCH_RETURN_IF_ERROR(
          cu::LayerNormForward(lnf_, lnf_mean_, lnf_rstd_, x_ + L * x_stride, w, w + c, n, c, stream));
    }
    Acquired<T> emb(params, 0);
    DSLAUNCH_RETURN_IF_ERROR(emb.status());
    DSLAUNCH_RETURN_IF_ERROR(cu::LinearForward<T>(*ctx_, logits_, lnf_, emb.data(), nullptr, n, c, v, stream));
    return cu::CrossEntropyForward(losses_, probs_, logits_, targets_, n, v, stream);
  }();
  if (!s.ok()) {
    b_ = 0;
    return s.WithContext(std::string(kOp) + ": head");
  }
  return Status::Ok();
}

template <typename T>
Result<float> GptCuda<T>::MeanLoss(cudaStream_t stream) const {
  constexpr char kOp[] = "GptCuda::MeanLoss";
  if (b_ == 0) return FailedPreconditionError(std::string(kOp) + ": no Forward has completed its launches");
  const int n = b_ * t_;
  std::vector<float> host(n);
  DSLAUNCH_RETURN_IF_ERROR(cu::CudaStatus(
      cudaMemcpyAsync(host.data(), losses_, n * sizeof(float), cudaMemcpyDeviceToHost, stream), kOp,
      "cudaMemcpyAsync losses"));
  DSLAUNCH_RETURN_IF_ERROR(cu::CudaStatus(cudaStreamSynchronize(stream), kOp, "cudaStreamSynchronize"));
  // As GptModel::Forward: the sum in double, then the mean rounded to float.
  double sum = 0;
  for (float x : host) sum += x;
  return static_cast<float>(sum / n);
}

template <typename T>
Status GptCuda<T>::BlockBackward(const T* g, T* dg, int l, cudaStream_t stream) {
  const GptConfig& cfg = shape_.config();
  const int b = b_, t = t_, n = b * t, c = cfg.n_embd, nh = cfg.n_head;
  const size_t nc = static_cast<size_t>(n) * c;
  const size_t x_stride = static_cast<size_t>(max_batch_) * cfg.block_size * c;
  auto w = [&](BlockTensor k) { return g + block_offset_[k]; };
  auto dw = [&](BlockTensor k) { return dg + block_offset_[k]; };
  const BlockActivations a = Block(l);
  const T* x = x_ + l * x_stride;
  // dx_ holds d(x_{l+1}); x_{l+1} = res2 + mlp(res2): dres_ = dx_ + the MLP branch.
  DSLAUNCH_RETURN_IF_ERROR(CopyOnDevice(dres_, dx_, nc, stream, "dres"));
  DSLAUNCH_RETURN_IF_ERROR(Zero(dfch_gelu_, 4 * nc, stream, "dfch_gelu"));
  DSLAUNCH_RETURN_IF_ERROR(cu::LinearBackward(*ctx_, dfch_gelu_, dw(kFcProjW), dw(kFcProjB), dx_, a.fch_gelu,
                                              w(kFcProjW), n, 4 * c, c, stream));
  DSLAUNCH_RETURN_IF_ERROR(Zero(dfch_, 4 * nc, stream, "dfch"));
  DSLAUNCH_RETURN_IF_ERROR(cu::GeluBackward(dfch_, dfch_gelu_, a.fch, static_cast<long>(4 * nc), stream));
  DSLAUNCH_RETURN_IF_ERROR(Zero(dtmp_c_, nc, stream, "dtmp_c"));
  DSLAUNCH_RETURN_IF_ERROR(
      cu::LinearBackward(*ctx_, dtmp_c_, dw(kFcW), dw(kFcB), dfch_, a.ln2, w(kFcW), n, c, 4 * c, stream));
  DSLAUNCH_RETURN_IF_ERROR(cu::LayerNormBackward(dres_, dw(kLn2W), dw(kLn2B), dtmp_c_, a.res2, w(kLn2W), a.ln2_mean,
                                                 a.ln2_rstd, n, c, stream));
  // res2 = x + attn(x): dx_ = dres_ + the attention branch.
  DSLAUNCH_RETURN_IF_ERROR(CopyOnDevice(dx_, dres_, nc, stream, "dx"));
  DSLAUNCH_RETURN_IF_ERROR(Zero(dtmp_c_, nc, stream, "dtmp_c"));
  DSLAUNCH_RETURN_IF_ERROR(
      cu::LinearBackward(*ctx_, dtmp_c_, dw(kProjW), dw(kProjB), dres_, a.atty, w(kProjW), n, c, c, stream));
  DSLAUNCH_RETURN_IF_ERROR(Zero(dqkv_, 3 * nc, stream, "dqkv"));
  DSLAUNCH_RETURN_IF_ERROR(
      cu::AttentionBackward(*ctx_, dqkv_, att_scratch_, dtmp_c_, a.qkv, a.att, b, t, c, nh, stream));
  DSLAUNCH_RETURN_IF_ERROR(Zero(dtmp_c2_, nc, stream, "dtmp_c2"));
  DSLAUNCH_RETURN_IF_ERROR(
      cu::LinearBackward(*ctx_, dtmp_c2_, dw(kAttnW), dw(kAttnB), dqkv_, a.ln1, w(kAttnW), n, c, 3 * c, stream));
  return cu::LayerNormBackward(dx_, dw(kLn1W), dw(kLn1B), dtmp_c2_, x, w(kLn1W), a.ln1_mean, a.ln1_rstd, n, c,
                               stream);
}

template <typename T>
Status GptCuda<T>::Backward(DeviceParameterAccess<T>& params, float loss_scale, cudaStream_t stream) {
  constexpr char kOp[] = "GptCuda::Backward";
  if (b_ == 0) return FailedPreconditionError(std::string(kOp) + ": no successful Forward to go back through");
  const GptConfig& cfg = shape_.config();
  const int b = b_, t = t_, n = b * t, c = cfg.n_embd, v = cfg.vocab_size, L = cfg.n_layer;
  const size_t nc = static_cast<size_t>(n) * c;
  const size_t x_stride = static_cast<size_t>(max_batch_) * cfg.block_size * c;

  // Loss -> logits -> final layer norm (mean loss: each row's share is 1/n). The head's term of
  // the tied embedding's gradient comes first, as in GptModel.
  Status s = [&] {
    DSLAUNCH_RETURN_IF_ERROR(Zero(dlogits_, static_cast<size_t>(n) * v, stream, "dlogits"));
    DSLAUNCH_RETURN_IF_ERROR(cu::CrossEntropyBackward(dlogits_, probs_, targets_, loss_scale / n, n, v, stream));
    DSLAUNCH_RETURN_IF_ERROR(Zero(dlnf_, nc, stream, "dlnf"));
    {
      Acquired<T> emb(params, 0);
      DSLAUNCH_RETURN_IF_ERROR(emb.status());
      DSLAUNCH_ASSIGN_OR_RETURN(T* demb, params.Gradient(0));
      DSLAUNCH_RETURN_IF_ERROR(
          cu::LinearBackward<T>(*ctx_, dlnf_, demb, nullptr, dlogits_, lnf_, emb.data(), n, c, v, stream));
    }
    DSLAUNCH_RETURN_IF_ERROR(Zero(dx_, nc, stream, "dx"));
    {
      Acquired<T> lnf(params, 1 + L);
      DSLAUNCH_RETURN_IF_ERROR(lnf.status());
      DSLAUNCH_ASSIGN_OR_RETURN(T* dlnf, params.Gradient(1 + L));
      const T* w = lnf.data() + lnf_offset_;
      DSLAUNCH_RETURN_IF_ERROR(cu::LayerNormBackward(dx_, dlnf + lnf_offset_, dlnf + lnf_offset_ + c, dlnf_,
                                                     x_ + L * x_stride, w, lnf_mean_, lnf_rstd_, n, c, stream));
    }
    return params.GradientReady(1 + L);
  }();
  if (!s.ok()) return s.WithContext(std::string(kOp) + ": head");

  for (int l = L - 1; l >= 0; --l) {
    s = [&] {
      {
        Acquired<T> block(params, 1 + l);
        DSLAUNCH_RETURN_IF_ERROR(block.status());
        DSLAUNCH_ASSIGN_OR_RETURN(T* dblock, params.Gradient(1 + l));
        DSLAUNCH_RETURN_IF_ERROR(BlockBackward(block.data(), dblock, l, stream));
      }
      return params.GradientReady(1 + l);
    }();
    if (!s.ok()) return s.WithContext(std::string(kOp) + ": " + LayerName(l));
  }

  // The embeddings: the op's float gradients of wte and wpe (adjacent in the layout). An fp32
  // gradient takes them directly; a 16-bit one through one scratch of (vocab + block_size) x C,
  // added in one pass.
  s = [&] {
    DSLAUNCH_ASSIGN_OR_RETURN(T* demb, params.Gradient(0));
    if constexpr (std::is_same_v<T, float>) {
      DSLAUNCH_RETURN_IF_ERROR(cu::EmbeddingBackward(demb, demb + wpe_offset_, dx_, tokens_, b, t, c, v, stream));
    } else {
      const size_t emb = (static_cast<size_t>(v) + cfg.block_size) * c;
      DSLAUNCH_RETURN_IF_ERROR(Zero(demb_, emb, stream, "embedding gradient scratch"));
      DSLAUNCH_RETURN_IF_ERROR(cu::EmbeddingBackward(demb_, demb_ + wpe_offset_, dx_, tokens_, b, t, c, v, stream));
      DSLAUNCH_RETURN_IF_ERROR(cu::AddFloat(demb, demb_, static_cast<long>(emb), stream));
    }
    return params.GradientReady(0);
  }();
  if (!s.ok()) return s.WithContext(std::string(kOp) + ": embeddings");
  return Status::Ok();
}

template class GptCuda<float>;
template class GptCuda<__nv_bfloat16>;
template class GptCuda<__half>;

}  // namespace dslaunch::runtime
