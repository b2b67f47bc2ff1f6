#include "runtime/models/gpt.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include "common/check.h"
#include "runtime/core/random.h"
#include "runtime/ops/cpu/ops.h"

namespace dslaunch::runtime {
namespace {

// GPT-2's initialisation scales.
constexpr float kInitStd = 0.02f;
constexpr float kPositionInitStd = 0.01f;

// Standard normal samples by Box-Muller on splitmix64: the same values on every platform and
// library version (std::normal_distribution is implementation-defined). A tensor of n values
// takes one pair of draws per two values (the last pair's sine unused when n is odd): values
// [from, to) of a tensor whose stream starts at `state` are computed without the ones before.
uint64_t NormalDraws(size_t n) { return n + (n & 1); }

void FillNormalRange(float* out, size_t from, size_t to, float stddev, uint64_t state) {
  constexpr double kTwoPi = 6.283185307179586;
  size_t i = from - from % 2;
  state = SkipSplitMix64(state, i);
  for (; i < to; i += 2) {
    double u1 = (static_cast<double>(SplitMix64(state) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (static_cast<double>(SplitMix64(state) >> 11) + 0.5) / 9007199254740992.0;
    double r = std::sqrt(-2.0 * std::log(u1));
    if (i >= from) out[i - from] = static_cast<float>(r * std::cos(kTwoPi * u2)) * stddev;
    if (i + 1 < to) out[i + 1 - from] = static_cast<float>(r * std::sin(kTwoPi * u2)) * stddev;
  }
}

}  // namespace

Status ValidateGptConfig(const GptConfig& config) {
  const struct {
    const char* key;
    int value;
    int max;
  } fields[] = {{"n_layer", config.n_layer, kMaxGptLayers},
                {"n_head", config.n_head, kMaxGptEmbedding},
                {"n_embd", config.n_embd, kMaxGptEmbedding},
                {"block_size", config.block_size, kMaxGptBlockSize},
                {"vocab_size", config.vocab_size, kMaxGptVocabSize}};
  for (const auto& f : fields) {
    if (f.value < 1 || f.value > f.max) {
      return InvalidArgumentError(std::string("model.") + f.key + ": must be in [1, " + std::to_string(f.max) +
                                  "], got " + std::to_string(f.value));
    }
  }
  if (config.n_embd % config.n_head != 0) {
    return InvalidArgumentError("model.n_embd: " + std::to_string(config.n_embd) + " is not divisible by n_head " +
                                std::to_string(config.n_head));
  }
  return Status::Ok();
}

namespace {

// The part's blocks [first, end).
std::pair<int, int> PartBlocks(const GptConfig& config, GptPart part) {
  return {part.first_block, part.end_block < 0 ? config.n_layer : part.end_block};
}

// Of the model's first recompute_blocks blocks, those in the part: its first ones.
int PartRecomputed(const GptConfig& config, GptPart part) {
  const auto [first, end] = PartBlocks(config, part);
  return std::clamp(config.recompute_blocks - first, 0, end - first);
}

}  // namespace

GptModel::GptModel(const GptConfig& config, int max_batch, GptPart part) : config_(config), max_batch_(max_batch) {
  DSLAUNCH_CHECK(config.n_head > 0 && config.n_embd % config.n_head == 0)
      << "n_embd " << config.n_embd << " must divide into n_head " << config.n_head;
  DSLAUNCH_CHECK(config.recompute_blocks >= 0 && config.recompute_blocks <= config.n_layer)
      << "recompute_blocks " << config.recompute_blocks << " outside 0.." << config.n_layer;
  std::tie(first_block_, end_block_) = PartBlocks(config, part);
  DSLAUNCH_CHECK(0 <= first_block_ && first_block_ < end_block_ && end_block_ <= config.n_layer)
      << "blocks [" << first_block_ << ", " << end_block_ << ") of " << config.n_layer;
  blocks_ = end_block_ - first_block_;
  recompute_ = PartRecomputed(config, part);
  BuildLayout();
  const size_t n = static_cast<size_t>(max_batch) * config.block_size;
  const size_t c = config.n_embd, l = blocks_, v = last() ? config.vocab_size : 0, nh = config.n_head;
  const size_t s = BlockSlots(config, part);  // sets of block internals: l, or fewer with recomputation
  const size_t tt = static_cast<size_t>(config.block_size) * config.block_size;
  const size_t head_rows = last() ? n : 0;
  tokens_.resize(n);
  targets_.resize(n);
  x_.resize((l + 1) * n * c);
  ln1_.resize(s * n * c), ln1_mean_.resize(s * n), ln1_rstd_.resize(s * n);
  qkv_.resize(s * n * 3 * c), att_.resize(s * max_batch * nh * tt), atty_.resize(s * n * c);
  res2_.resize(s * n * c), ln2_.resize(s * n * c), ln2_mean_.resize(s * n), ln2_rstd_.resize(s * n);
  fch_.resize(s * n * 4 * c), fch_gelu_.resize(s * n * 4 * c);
  lnf_.resize(head_rows * c), lnf_mean_.resize(head_rows), lnf_rstd_.resize(head_rows), logits_.resize(n * v),
      probs_.resize(n * v), losses_.resize(head_rows);
  dx_.resize(n * c), dtmp_c_.resize(n * c), dtmp_c2_.resize(n * c), dqkv_.resize(n * 3 * c),
      dfch_.resize(n * 4 * c), dfch_gelu_.resize(n * 4 * c), dlnf_.resize(head_rows * c), dlogits_.resize(n * v);
}

int GptModel::BlockSlots(const GptConfig& config, GptPart part) {
  const auto [first, end] = PartBlocks(config, part);
  const int recomputed = PartRecomputed(config, part);
  return recomputed > 0 ? end - first - recomputed + 1 : end - first;
}

std::vector<double> GptModel::GroupSizes(const GptConfig& config, GptPart part) {
  const double c = config.n_embd;
  const auto [first, end] = PartBlocks(config, part);
  std::vector<double> sizes;
  if (first == 0) sizes.push_back((static_cast<double>(config.vocab_size) + config.block_size) * c);
  // Per block: ln_1 and ln_2 (2c each), c_attn (3c x c + 3c), attn c_proj (c x c + c),
  // mlp c_fc (4c x c + 4c), mlp c_proj (c x 4c + c): 12c^2 + 13c.
  sizes.insert(sizes.end(), static_cast<size_t>(std::max(end - first, 0)), 12.0 * c * c + 13.0 * c);
  if (end == config.n_layer) sizes.push_back(2.0 * c);  // ln_f
  return sizes;
}

double GptModel::NumParameters(const GptConfig& config) {
  const std::vector<double> sizes = GroupSizes(config);
  return std::accumulate(sizes.begin(), sizes.end(), 0.0);
}

double GptModel::ActivationBytes(const GptConfig& config, int max_batch, GptPart part) {
  // Element counts of the constructor's buffers, in its order; s sets of block internals. A part
  // without the head has no final norm, logits or losses.
  const auto [first, end] = PartBlocks(config, part);
  const double n = static_cast<double>(max_batch) * config.block_size;
  const double head = end == config.n_layer ? 1.0 : 0.0;
  const double c = config.n_embd, l = end - first, v = head * config.vocab_size, nh = config.n_head;
  const double s = BlockSlots(config, part);
  const double tt = static_cast<double>(config.block_size) * config.block_size;
  const double ints = 2 * n;  // tokens, targets
  const double floats = (l + 1) * n * c                                 // x: every block's input, and the last output
                        + s * n * c + 2 * s * n                          // ln1, mean, rstd
                        + s * n * 3 * c + s * max_batch * nh * tt + s * n * c  // qkv, att, atty
                        + 2 * s * n * c + 2 * s * n                      // res2, ln2, mean, rstd
                        + 2 * s * n * 4 * c                              // fch, fch_gelu
                        + head * (n * c + 2 * n + n) + 2 * n * v         // lnf, mean, rstd, losses; logits, probs
                        + 3 * n * c + n * 3 * c + 2 * n * 4 * c + head * n * c + n * v;  // backward scratch
  return ints * sizeof(int) + floats * sizeof(float);
}

size_t GptModel::activation_bytes() const {
  size_t floats = 0;
  for (const auto* b : {&x_, &ln1_, &ln1_mean_, &ln1_rstd_, &qkv_, &att_, &atty_, &res2_, &ln2_, &ln2_mean_,
                        &ln2_rstd_, &fch_, &fch_gelu_, &lnf_, &lnf_mean_, &lnf_rstd_, &logits_, &probs_, &losses_,
                        &dx_, &dtmp_c_, &dtmp_c2_, &dqkv_, &dfch_, &dfch_gelu_, &dlnf_, &dlogits_}) {
    floats += b->size();
  }
  return floats * sizeof(float) + (tokens_.size() + targets_.size()) * sizeof(int);
}

void GptModel::BuildLayout() {
  const int c = config_.n_embd;
  // The whole model's tensors in order, each with its initialisation: the seed stream advances
  // over the normal tensors only (GPT-2's scheme: InitRange), so a part's tensors find their
  // values at their offset in it.
  const float proj_std = kInitStd / std::sqrt(2.0f * static_cast<float>(std::max(1, config_.n_layer)));
  uint64_t draws = 0;
  auto add = [&](bool keep, const std::string& name, std::vector<int> shape, bool decay, float stddev,
                 float constant) -> size_t {
    size_t numel = 1;
    for (int d : shape) numel *= static_cast<size_t>(d);
    const TensorInit init{draws, stddev, constant};
    if (stddev > 0) draws += NormalDraws(numel);
    if (!keep) return 0;
    init_.push_back(init);
    return layout_.Add(name, std::move(shape), decay);
  };
  if (first()) layout_.BeginGroup("embeddings");
  add(first(), "wte.weight", {config_.vocab_size, c}, true, kInitStd, 0);
  wpe_offset_ = add(first(), "wpe.weight", {config_.block_size, c}, true, kPositionInitStd, 0);
  for (int l = 0; l < config_.n_layer; ++l) {
    const bool keep = l >= first_block_ && l < end_block_;
    const std::string p = "h." + std::to_string(l) + ".";
    if (keep) layout_.BeginGroup("h." + std::to_string(l));
    size_t base = layout_.numel();
    size_t off[kBlockTensors];
    off[kLn1W] = add(keep, p + "ln_1.weight", {c}, false, 0, 1);
    off[kLn1B] = add(keep, p + "ln_1.bias", {c}, false, 0, 0);
    off[kAttnW] = add(keep, p + "attn.c_attn.weight", {3 * c, c}, true, kInitStd, 0);
    off[kAttnB] = add(keep, p + "attn.c_attn.bias", {3 * c}, false, 0, 0);
    off[kProjW] = add(keep, p + "attn.c_proj.weight", {c, c}, true, proj_std, 0);
    off[kProjB] = add(keep, p + "attn.c_proj.bias", {c}, false, 0, 0);
    off[kLn2W] = add(keep, p + "ln_2.weight", {c}, false, 0, 1);
    off[kLn2B] = add(keep, p + "ln_2.bias", {c}, false, 0, 0);
    off[kFcW] = add(keep, p + "mlp.c_fc.weight", {4 * c, c}, true, kInitStd, 0);
    off[kFcB] = add(keep, p + "mlp.c_fc.bias", {4 * c}, false, 0, 0);
    off[kFcProjW] = add(keep, p + "mlp.c_proj.weight", {c, 4 * c}, true, proj_std, 0);
    off[kFcProjB] = add(keep, p + "mlp.c_proj.bias", {c}, false, 0, 0);
    if (keep) {
      for (int i = 0; i < kBlockTensors; ++i) block_offset_[i] = off[i] - base;
    }
  }
  if (last()) layout_.BeginGroup("ln_f");
  add(last(), "ln_f.weight", {c}, false, 0, 1);
  add(last(), "ln_f.bias", {c}, false, 0, 0);
}

void GptModel::InitParameters(std::span<float> flat, uint64_t seed) const {
  DSLAUNCH_CHECK(flat.size() == layout_.numel()) << "flat buffer of " << flat.size() << " for " << layout_.numel();
  InitRange(0, flat, seed);
}

void GptModel::InitRange(size_t begin, std::span<float> out, uint64_t seed) const {
  const size_t end = begin + out.size();
  DSLAUNCH_CHECK(begin <= end && end <= layout_.numel()) << "range [" << begin << ", " << end << ") of " << layout_.numel();
  size_t index = 0;  // the tensor's place in init_
  for (const auto& g : layout_.groups()) {
    for (const auto& t : g.tensors) {
      const TensorInit& init = init_[index++];
      if (t.offset >= end) return;
      const size_t lo = std::max(begin, t.offset), hi = std::min(end, t.offset + t.numel);
      if (lo >= hi) continue;
      float* p = out.data() + (lo - begin);
      if (init.stddev == 0) {
        std::fill(p, p + (hi - lo), init.constant);
      } else {
        FillNormalRange(p, lo - t.offset, hi - t.offset, init.stddev, SkipSplitMix64(seed, init.state_offset));
      }
    }
  }
}

GptModel::BlockActivations GptModel::Block(int l) {
  // The part's recomputed blocks share slot 0; the others have one slot each after it.
  const int recomputed = recompute_;
  const size_t slot = recomputed == 0 ? l : l < recomputed ? 0 : l - recomputed + 1;
  const size_t n = static_cast<size_t>(b_) * t_, nc = n * config_.n_embd;
  const size_t natt = static_cast<size_t>(b_) * config_.n_head * t_ * t_;
  return {ln1_.data() + slot * nc,      ln1_mean_.data() + slot * n, ln1_rstd_.data() + slot * n,
          qkv_.data() + slot * 3 * nc,  att_.data() + slot * natt,   atty_.data() + slot * nc,
          res2_.data() + slot * nc,     ln2_.data() + slot * nc,     ln2_mean_.data() + slot * n,
          ln2_rstd_.data() + slot * n,  fch_.data() + slot * 4 * nc, fch_gelu_.data() + slot * 4 * nc};
}

void GptModel::BlockForward(const float* g, int l, bool output) {
  const int b = b_, t = t_, n = b * t, c = config_.n_embd, nh = config_.n_head;
  const size_t nc = static_cast<size_t>(n) * c;
  auto w = [&](BlockTensor k) { return g + block_offset_[k]; };
  const BlockActivations a = Block(l);
  const float* x = x_.data() + l * nc;
  ops::LayerNormForward(a.ln1, a.ln1_mean, a.ln1_rstd, x, w(kLn1W), w(kLn1B), n, c);
  ops::LinearForward(a.qkv, a.ln1, w(kAttnW), w(kAttnB), n, c, 3 * c);
  ops::AttentionForward(a.atty, a.att, a.qkv, b, t, c, nh);
  ops::LinearResidualForward(a.res2, a.atty, w(kProjW), w(kProjB), x, n, c, c);
  ops::LayerNormForward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, w(kLn2W), w(kLn2B), n, c);
  ops::LinearGeluForward(a.fch, a.fch_gelu, a.ln2, w(kFcW), w(kFcB), n, c, 4 * c);
  if (!output) return;
  ops::LinearResidualForward(x_.data() + (l + 1) * nc, a.fch_gelu, w(kFcProjW), w(kFcProjB), a.res2, n, 4 * c, c);
}

float GptModel::Forward(ParameterAccess& params, const int* tokens, const int* targets, int b, int t) {
  DSLAUNCH_CHECK(first() && last()) << "Forward runs the whole model; a part runs ForwardPart";
  return ForwardPart(params, tokens, nullptr, targets, b, t);
}

void GptModel::Backward(ParameterAccess& params, float loss_scale) {
  DSLAUNCH_CHECK(first() && last()) << "Backward runs the whole model; a part runs BackwardPart";
  BackwardPart(params, loss_scale, nullptr);
}

void GptModel::SetTiedHead(std::span<const float> weight, std::span<float> gradient) {
  const size_t size = static_cast<size_t>(config_.vocab_size) * config_.n_embd;
  DSLAUNCH_CHECK(last() && !first() && weight.size() == size && gradient.size() == size)
      << "a tied head of " << weight.size() << " and " << gradient.size() << " values for a [" << config_.vocab_size
      << "][" << config_.n_embd << "] embedding, on blocks [" << first_block_ << ", " << end_block_ << ")";
  tied_weight_ = weight;
  tied_gradient_ = gradient;
}

std::span<const float> GptModel::output() const {
  DSLAUNCH_CHECK(!last()) << "the last part ends with the loss";
  const size_t nc = static_cast<size_t>(b_) * t_ * config_.n_embd;
  return {x_.data() + blocks_ * nc, nc};
}

std::span<const float> GptModel::input_gradient() const {
  DSLAUNCH_CHECK(!first()) << "the first part starts from tokens";
  return {dx_.data(), static_cast<size_t>(b_) * t_ * config_.n_embd};
}

void GptModel::HeadForward(ParameterAccess& params) {
  const int n = b_ * t_, c = config_.n_embd, v = config_.vocab_size;
  if (first()) {
    std::span<const float> emb = params.Acquire(EmbeddingGroup());
    ops::LinearForward(logits_.data(), lnf_.data(), emb.data(), nullptr, n, c, v);
    params.Release(EmbeddingGroup());
  } else {
    DSLAUNCH_CHECK(!tied_weight_.empty()) << "the last part's head needs SetTiedHead";
    ops::LinearForward(logits_.data(), lnf_.data(), tied_weight_.data(), nullptr, n, c, v);
  }
}

void GptModel::HeadBackward(ParameterAccess& params, float loss_scale) {
  const int n = b_ * t_, c = config_.n_embd, v = config_.vocab_size;
  // Loss -> logits -> the final norm's output (mean loss: each row's share is 1/n).
  std::fill(dlogits_.begin(), dlogits_.begin() + static_cast<size_t>(n) * v, 0.0f);
  ops::CrossEntropyBackward(dlogits_.data(), probs_.data(), targets_.data(), loss_scale / n, n, v);
  if (first()) {
    std::span<const float> emb = params.Acquire(EmbeddingGroup());
    std::span<float> demb = params.Gradient(EmbeddingGroup());
    ops::LinearBackward(dlnf_.data(), demb.data(), nullptr, dlogits_.data(), lnf_.data(), emb.data(), n, c, v,
                        ops::GradMode::kSet);
    params.Release(EmbeddingGroup());
  } else {
    ops::LinearBackward(dlnf_.data(), tied_gradient_.data(), nullptr, dlogits_.data(), lnf_.data(),
                        tied_weight_.data(), n, c, v, ops::GradMode::kSet);
  }
}

float GptModel::ForwardPart(ParameterAccess& params, const int* tokens, const float* input, const int* targets, int b,
                            int t) {
  DSLAUNCH_CHECK(b <= max_batch_ && t <= config_.block_size) << "batch " << b << "x" << t << " too large";
  b_ = b, t_ = t;
  const int n = b * t, c = config_.n_embd;
  const size_t nc = static_cast<size_t>(n) * c;
  if (first()) {
    std::copy(tokens, tokens + n, tokens_.begin());
  } else {
    std::copy(input, input + nc, x_.begin());
  }
  if (last()) std::copy(targets, targets + n, targets_.begin());

  if (first()) {
    std::span<const float> emb = params.Acquire(EmbeddingGroup());
    ops::EmbeddingForward(x_.data(), tokens, emb.data(), emb.data() + wpe_offset_, b, t, c);
    params.Release(EmbeddingGroup());
  }

  for (int l = 0; l < blocks_; ++l) {
    BlockForward(params.Acquire(BlockGroup(l)).data(), l, /*output=*/true);
    params.Release(BlockGroup(l));
  }
  if (!last()) return 0.0f;

  std::span<const float> lnf = params.Acquire(FinalNormGroup());
  ops::LayerNormForward(lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), x_.data() + blocks_ * nc, lnf.data(),
                        lnf.data() + c, n, c);
  params.Release(FinalNormGroup());
  HeadForward(params);
  ops::CrossEntropyForward(losses_.data(), probs_.data(), logits_.data(), targets_.data(), n, config_.vocab_size);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += losses_[i];
  return static_cast<float>(sum / n);
}

void GptModel::BackwardPart(ParameterAccess& params, float loss_scale, const float* output_gradient) {
  const int b = b_, t = t_, n = b * t, c = config_.n_embd, nh = config_.n_head;
  const size_t nc = static_cast<size_t>(n) * c;
  auto zero = [](std::vector<float>& buf, size_t count) { std::fill(buf.begin(), buf.begin() + count, 0.0f); };

  if (last()) {
    HeadBackward(params, loss_scale);
    std::span<const float> lnf = params.Acquire(FinalNormGroup());
    std::span<float> dlnf = params.Gradient(FinalNormGroup());
    zero(dx_, nc);
    ops::LayerNormBackward(dx_.data(), dlnf.data(), dlnf.data() + c, dlnf_.data(), x_.data() + blocks_ * nc,
                           lnf.data(), lnf_mean_.data(), lnf_rstd_.data(), n, c);
    params.Release(FinalNormGroup());
    params.GradientReady(FinalNormGroup());
  } else {
    std::copy(output_gradient, output_gradient + nc, dx_.begin());
  }

  for (int l = blocks_ - 1; l >= 0; --l) {
    const int group = BlockGroup(l);
    std::span<const float> g = params.Acquire(group);
    // A recomputed block kept only its input: run its forward again (same kernels, same inputs,
    // so the same bits) into the shared slot, now that the blocks above it are done with theirs.
    if (l < recompute_) BlockForward(g.data(), l, /*output=*/false);
    std::span<float> dg = params.Gradient(group);
    auto w = [&](BlockTensor k) { return g.data() + block_offset_[k]; };
    auto dw = [&](BlockTensor k) { return dg.data() + block_offset_[k]; };
    const BlockActivations a = Block(l);
    const float* x = x_.data() + l * nc;
    // dx_ holds d(x_{l+1}). x_{l+1} = res2 + mlp(res2): once the MLP's output layer has read dx_
    // as its output gradient, ln_2's backward adds the MLP branch into it, leaving d(res2) there.
    // Each scratch gradient is written (kSet) before it is read, so none is zeroed first.
    ops::LinearBackward(dfch_gelu_.data(), dw(kFcProjW), dw(kFcProjB), dx_.data(), a.fch_gelu, w(kFcProjW), n,
                        4 * c, c, ops::GradMode::kSet);
    ops::GeluBackwardBias(dfch_.data(), dw(kFcB), dfch_gelu_.data(), a.fch, n, 4 * c);
    ops::LinearBackward(dtmp_c_.data(), dw(kFcW), nullptr, dfch_.data(), a.ln2, w(kFcW), n, c, 4 * c,
                        ops::GradMode::kSet);
    ops::LayerNormBackward(dx_.data(), dw(kLn2W), dw(kLn2B), dtmp_c_.data(), a.res2, w(kLn2W), a.ln2_mean,
                           a.ln2_rstd, n, c);
    // res2 = x + attn(x): likewise, ln_1's backward adds the attention branch to d(res2).
    ops::LinearBackward(dtmp_c_.data(), dw(kProjW), dw(kProjB), dx_.data(), a.atty, w(kProjW), n, c, c,
                        ops::GradMode::kSet);
    zero(dqkv_, 3 * nc);
    ops::AttentionBackward(dqkv_.data(), dtmp_c_.data(), a.qkv, a.att, b, t, c, nh);
    ops::LinearBackward(dtmp_c2_.data(), dw(kAttnW), dw(kAttnB), dqkv_.data(), a.ln1, w(kAttnW), n, c, 3 * c,
                        ops::GradMode::kSet);
    ops::LayerNormBackward(dx_.data(), dw(kLn1W), dw(kLn1B), dtmp_c2_.data(), x, w(kLn1W), a.ln1_mean,
                           a.ln1_rstd, n, c);
    params.Release(group);
    params.GradientReady(group);
  }

  if (first()) {
    std::span<float> demb = params.Gradient(EmbeddingGroup());
    ops::EmbeddingBackward(demb.data(), demb.data() + wpe_offset_, dx_.data(), tokens_.data(), b, t, c);
    params.GradientReady(EmbeddingGroup());
  }
}

double GptModel::FlopsPerToken(const GptConfig& config, int t) {
  // 6 FLOPs per matmul parameter per token (forward 2, backward 4), the lm head included (tied
  // wte), plus attention's q.k and a.v: 2 x 2 x t x C per layer forward, x3 with backward.
  const double c = config.n_embd, l = config.n_layer, v = config.vocab_size;
  const double matmul_params = l * 12.0 * c * c + v * c;
  return 6.0 * matmul_params + 12.0 * l * t * c;
}

}  // namespace dslaunch::runtime
