#include "runtime/models/gpt.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
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

Status ValidateGptTensorSplit(const GptConfig& config, int tensor_size) {
  if (tensor_size < 1) {
    return InvalidArgumentError("tensor_parallel.autotp_size: must be at least 1, got " + std::to_string(tensor_size));
  }
  if (config.n_head % tensor_size != 0) {
    return InvalidArgumentError("tensor_parallel.autotp_size: " + std::to_string(tensor_size) +
                                " tensor ranks cannot share model.n_head " + std::to_string(config.n_head) +
                                " heads evenly; choose a size that divides n_head");
  }
  if (config.vocab_size < tensor_size) {
    return InvalidArgumentError("tensor_parallel.autotp_size: " + std::to_string(tensor_size) +
                                " tensor ranks for model.vocab_size " + std::to_string(config.vocab_size) +
                                ": each rank needs a row of the vocabulary");
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

GptModel::Widths GptModel::WidthsOf(const GptConfig& config, GptPart part) {
  const int t = std::max(part.tensor_size, 1);
  Widths w;
  w.heads = config.n_head / t;
  w.attn = w.heads * (config.n_embd / config.n_head);
  w.mlp = 4 * config.n_embd / t;
  w.vocab = ShardFor(static_cast<size_t>(config.vocab_size), t, std::clamp(part.tensor_rank, 0, t - 1));
  return w;
}

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
  DSLAUNCH_CHECK(ValidateGptTensorSplit(config, part.tensor_size).ok() && part.tensor_rank >= 0 &&
                 part.tensor_rank < part.tensor_size)
      << "tensor rank " << part.tensor_rank << " of " << part.tensor_size << " for " << config.n_head << " heads";
  tensor_rank_ = part.tensor_rank, tensor_size_ = part.tensor_size;
  widths_ = WidthsOf(config, part);
  BuildLayout();
  const size_t n = static_cast<size_t>(max_batch) * config.block_size;
  const size_t c = config.n_embd, l = blocks_, v = last() ? widths_.vocab.size() : 0, nh = widths_.heads;
  const size_t a = widths_.attn, m = widths_.mlp;
  const size_t s = BlockSlots(config, part);  // sets of block internals: l, or fewer with recomputation
  const size_t tt = static_cast<size_t>(config.block_size) * config.block_size;
  const size_t head_rows = last() ? n : 0;
  tokens_.resize(n);
  targets_.resize(n);
  x_.resize((l + 1) * n * c);
  ln1_.resize(s * n * c), ln1_mean_.resize(s * n), ln1_rstd_.resize(s * n);
  qkv_.resize(s * n * 3 * a), att_.resize(s * max_batch * nh * tt), atty_.resize(s * n * a);
  res2_.resize(s * n * c), ln2_.resize(s * n * c), ln2_mean_.resize(s * n), ln2_rstd_.resize(s * n);
  fch_.resize(s * n * m), fch_gelu_.resize(s * n * m);
  lnf_.resize(head_rows * c), lnf_mean_.resize(head_rows), lnf_rstd_.resize(head_rows), logits_.resize(n * v),
      probs_.resize(n * v), losses_.resize(head_rows);
  dx_.resize(n * c), dtmp_c_.resize(n * c), dtmp_c2_.resize(n * c), dqkv_.resize(n * 3 * a),
      dfch_.resize(n * m), dfch_gelu_.resize(n * m), dlnf_.resize(head_rows * c), dlogits_.resize(n * v);
  if (split()) row_max_.resize(head_rows), row_sum_.resize(head_rows), local_targets_.resize(head_rows);
}

void GptModel::SetTensorGroup(TensorGroup& group) {
  DSLAUNCH_CHECK(group.size() == tensor_size_ && group.rank() == tensor_rank_)
      << "a tensor group of " << group.size() << " (rank " << group.rank() << ") for tensor rank " << tensor_rank_
      << " of " << tensor_size_;
  tensor_group_ = &group;
}

void GptModel::GroupReduce(Status (TensorGroup::*op)(std::span<float>), float* data, size_t count) {
  if (!split()) return;
  DSLAUNCH_CHECK(tensor_group_ != nullptr) << "a tensor-parallel part needs SetTensorGroup";
  Status done = (tensor_group_->*op)(std::span<float>(data, count));
  if (status_.ok() && !done.ok()) status_ = std::move(done);
}

std::vector<ShardRange> GptModel::ReplicatedRanges() const {
  std::vector<ShardRange> ranges;
  if (!split()) return ranges;
  size_t index = 0;
  for (const auto& g : layout_.groups()) {
    for (const auto& t : g.tensors) {
      if (!init_[index++].replicated) continue;
      if (!ranges.empty() && ranges.back().end == t.offset) {
        ranges.back().end = t.offset + t.numel;
      } else {
        ranges.push_back({t.offset, t.offset + t.numel});
      }
    }
  }
  return ranges;
}

int GptModel::BlockSlots(const GptConfig& config, GptPart part) {
  const auto [first, end] = PartBlocks(config, part);
  const int recomputed = PartRecomputed(config, part);
  return recomputed > 0 ? end - first - recomputed + 1 : end - first;
}

std::vector<double> GptModel::GroupSizes(const GptConfig& config, GptPart part) {
  const double c = config.n_embd;
  const auto [first, end] = PartBlocks(config, part);
  const Widths w = WidthsOf(config, part);
  const double a = w.attn, m = w.mlp;
  std::vector<double> sizes;
  if (first == 0) sizes.push_back((static_cast<double>(w.vocab.size()) + config.block_size) * c);
  // Per block, with a = c and m = 4c unsplit: ln_1 and ln_2 (2c each), c_attn (3a x c + 3a), attn
  // c_proj (c x a + c), mlp c_fc (m x c + m), mlp c_proj (c x m + c): 12c^2 + 13c unsplit.
  sizes.insert(sizes.end(), static_cast<size_t>(std::max(end - first, 0)),
               4.0 * c + 3.0 * a * c + 3.0 * a + c * a + c + m * c + m + c * m + c);
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
  // A split part's widths: a = c / t attention, m = 4c / t MLP units, its rows of the vocabulary.
  const auto [first, end] = PartBlocks(config, part);
  const Widths w = WidthsOf(config, part);
  const double n = static_cast<double>(max_batch) * config.block_size;
  const double head = end == config.n_layer ? 1.0 : 0.0;
  const double split_head = part.tensor_size > 1 ? head : 0.0;
  const double c = config.n_embd, l = end - first, v = head * static_cast<double>(w.vocab.size()), nh = w.heads;
  const double a = w.attn, m = w.mlp;
  const double s = BlockSlots(config, part);
  const double tt = static_cast<double>(config.block_size) * config.block_size;
  const double ints = 2 * n + split_head * n;  // tokens, targets; a split head's targets in its rows
  const double floats = (l + 1) * n * c                                 // x: every block's input, and the last output
                        + s * n * c + 2 * s * n                          // ln1, mean, rstd
                        + s * n * 3 * a + s * max_batch * nh * tt + s * n * a  // qkv, att, atty
                        + 2 * s * n * c + 2 * s * n                      // res2, ln2, mean, rstd
                        + 2 * s * n * m                                  // fch, fch_gelu
                        + head * (n * c + 2 * n + n) + 2 * n * v         // lnf, mean, rstd, losses; logits, probs
                        + split_head * 2 * n                             // a split head's row maxima and sums
                        + 3 * n * c + n * 3 * a + 2 * n * m + head * n * c + n * v;  // backward scratch
  return ints * sizeof(int) + floats * sizeof(float);
}

size_t GptModel::activation_bytes() const {
  size_t floats = 0;
  for (const auto* b : {&x_, &ln1_, &ln1_mean_, &ln1_rstd_, &qkv_, &att_, &atty_, &res2_, &ln2_, &ln2_mean_,
                        &ln2_rstd_, &fch_, &fch_gelu_, &lnf_, &lnf_mean_, &lnf_rstd_, &logits_, &probs_, &losses_,
                        &dx_, &dtmp_c_, &dtmp_c2_, &dqkv_, &dfch_, &dfch_gelu_, &dlnf_, &dlogits_, &row_max_,
                        &row_sum_}) {
    floats += b->size();
  }
  return floats * sizeof(float) + (tokens_.size() + targets_.size() + local_targets_.size()) * sizeof(int);
}

void GptModel::BuildLayout() {
  const int c = config_.n_embd, a = widths_.attn, m = widths_.mlp, r = tensor_rank_;
  const size_t cc = static_cast<size_t>(c);
  // The whole model's tensors in order, each with its initialisation: the seed stream advances
  // over the normal tensors only (GPT-2's scheme: InitRange), by the whole tensor's count, so a
  // part's tensors, and a tensor rank's slices of them, find their values where they lie in it.
  const float proj_std = kInitStd / std::sqrt(2.0f * static_cast<float>(std::max(1, config_.n_layer)));
  uint64_t draws = 0;
  size_t whole_offset = 0;  // the tensor's place in the whole model's flat buffer
  // A tensor without a slice is whole: one run of all its values.
  auto add = [&](bool keep, const std::string& name, size_t whole, std::vector<int> shape, bool decay, float stddev,
                 float constant, std::optional<Slice> slice = std::nullopt) -> size_t {
    const TensorInit init{draws, stddev, constant, slice.value_or(Slice{0, 0, whole, 1}), !slice.has_value(),
                          whole_offset};
    if (stddev > 0) draws += NormalDraws(whole);
    whole_offset += whole;
    if (!keep) return 0;
    init_.push_back(init);
    return layout_.Add(name, std::move(shape), decay);
  };
  // Rows [from, from + rows) of a [*][cols] tensor; columns [from, from + cols) of each of `rows`
  // rows of a [rows][width] one.
  auto rows = [](size_t from, size_t count, size_t cols) { return Slice{from * cols, 0, count * cols, 1}; };
  auto columns = [](size_t from, size_t cols, size_t count, size_t width) { return Slice{from, width, cols, count}; };
  std::optional<Slice> wte, attn_w, attn_b, proj_w, fc_w, fc_b, fc_proj_w;
  if (split()) {
    const size_t sa = static_cast<size_t>(r) * a, sm = static_cast<size_t>(r) * m;
    wte = rows(widths_.vocab.begin, widths_.vocab.size(), cc);
    attn_w = Slice{sa * cc, cc * cc, static_cast<size_t>(a) * cc, 3};  // its heads of q, of k, of v
    attn_b = Slice{sa, cc, static_cast<size_t>(a), 3};
    proj_w = columns(sa, a, cc, cc);
    fc_w = rows(sm, m, cc);
    fc_b = rows(sm, m, 1);
    fc_proj_w = columns(sm, m, cc, 4 * cc);
  }
  const int v = static_cast<int>(widths_.vocab.size());
  if (first()) layout_.BeginGroup("embeddings");
  add(first(), "wte.weight", static_cast<size_t>(config_.vocab_size) * cc, {v, c}, true, kInitStd, 0, wte);
  wpe_offset_ = add(first(), "wpe.weight", static_cast<size_t>(config_.block_size) * cc, {config_.block_size, c}, true,
                    kPositionInitStd, 0);
  for (int l = 0; l < config_.n_layer; ++l) {
    const bool keep = l >= first_block_ && l < end_block_;
    const std::string p = "h." + std::to_string(l) + ".";
    if (keep) layout_.BeginGroup("h." + std::to_string(l));
    size_t base = layout_.numel();
    size_t off[kBlockTensors];
    off[kLn1W] = add(keep, p + "ln_1.weight", cc, {c}, false, 0, 1);
    off[kLn1B] = add(keep, p + "ln_1.bias", cc, {c}, false, 0, 0);
    off[kAttnW] = add(keep, p + "attn.c_attn.weight", 3 * cc * cc, {3 * a, c}, true, kInitStd, 0, attn_w);
    off[kAttnB] = add(keep, p + "attn.c_attn.bias", 3 * cc, {3 * a}, false, 0, 0, attn_b);
    off[kProjW] = add(keep, p + "attn.c_proj.weight", cc * cc, {c, a}, true, proj_std, 0, proj_w);
    off[kProjB] = add(keep, p + "attn.c_proj.bias", cc, {c}, false, 0, 0);
    off[kLn2W] = add(keep, p + "ln_2.weight", cc, {c}, false, 0, 1);
    off[kLn2B] = add(keep, p + "ln_2.bias", cc, {c}, false, 0, 0);
    off[kFcW] = add(keep, p + "mlp.c_fc.weight", 4 * cc * cc, {m, c}, true, kInitStd, 0, fc_w);
    off[kFcB] = add(keep, p + "mlp.c_fc.bias", 4 * cc, {m}, false, 0, 0, fc_b);
    off[kFcProjW] = add(keep, p + "mlp.c_proj.weight", 4 * cc * cc, {c, m}, true, proj_std, 0, fc_proj_w);
    off[kFcProjB] = add(keep, p + "mlp.c_proj.bias", cc, {c}, false, 0, 0);
    if (keep) {
      for (int i = 0; i < kBlockTensors; ++i) block_offset_[i] = off[i] - base;
    }
  }
  if (last()) layout_.BeginGroup("ln_f");
  add(last(), "ln_f.weight", cc, {c}, false, 0, 1);
  add(last(), "ln_f.bias", cc, {c}, false, 0, 0);
}

std::vector<WholePiece> GptModel::WholePieces() const {
  std::vector<WholePiece> pieces;
  for (const TensorInit& init : init_) {
    const Slice& s = init.slice;
    AppendPiece(pieces, {init.whole_offset + s.start, s.count > 1 ? s.stride : 0, s.run, s.count});
  }
  return pieces;
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
        continue;
      }
      // The tensor's values [lo, hi) run by run of its slice of the whole tensor's stream.
      const Slice& slice = init.slice;
      const uint64_t state = SkipSplitMix64(seed, init.state_offset);
      for (size_t at = lo - t.offset; at < hi - t.offset;) {
        const size_t k = at / slice.run, in_run = at % slice.run;
        const size_t count = std::min(slice.run - in_run, hi - t.offset - at);
        const size_t from = slice.start + k * slice.stride + in_run;
        FillNormalRange(p, from, from + count, init.stddev, state);
        p += count, at += count;
      }
    }
  }
}

GptModel::BlockActivations GptModel::Block(int l) {
  // The part's recomputed blocks share slot 0; the others have one slot each after it.
  const int recomputed = recompute_;
  const size_t slot = recomputed == 0 ? l : l < recomputed ? 0 : l - recomputed + 1;
  const size_t n = static_cast<size_t>(b_) * t_, nc = n * config_.n_embd, na = n * widths_.attn, nm = n * widths_.mlp;
  const size_t natt = static_cast<size_t>(b_) * widths_.heads * t_ * t_;
  return {ln1_.data() + slot * nc,      ln1_mean_.data() + slot * n, ln1_rstd_.data() + slot * n,
          qkv_.data() + slot * 3 * na,  att_.data() + slot * natt,   atty_.data() + slot * na,
          res2_.data() + slot * nc,     ln2_.data() + slot * nc,     ln2_mean_.data() + slot * n,
          ln2_rstd_.data() + slot * n,  fch_.data() + slot * nm,     fch_gelu_.data() + slot * nm};
}

void GptModel::BlockForward(const float* g, int l, bool output) {
  const int b = b_, t = t_, n = b * t, c = config_.n_embd, nh = widths_.heads, ca = widths_.attn, m = widths_.mlp;
  const size_t nc = static_cast<size_t>(n) * c;
  auto w = [&](BlockTensor k) { return g + block_offset_[k]; };
  const BlockActivations a = Block(l);
  const float* x = x_.data() + l * nc;
  // Split, each c_proj's product over this rank's columns is summed over the group before its
  // bias and residual are added (unsplit, the fused op does the same in one pass).
  auto row_parallel = [&](float* out, const float* in, BlockTensor weight, BlockTensor bias, const float* residual,
                          int in_dim) {
    if (!split()) return ops::LinearResidualForward(out, in, w(weight), w(bias), residual, n, in_dim, c);
    ops::LinearForward(out, in, w(weight), nullptr, n, in_dim, c);
    GroupSum(out, nc);
    ops::BiasResidualForward(out, w(bias), residual, n, c);
  };
  ops::LayerNormForward(a.ln1, a.ln1_mean, a.ln1_rstd, x, w(kLn1W), w(kLn1B), n, c);
  ops::LinearForward(a.qkv, a.ln1, w(kAttnW), w(kAttnB), n, c, 3 * ca);
  ops::AttentionForward(a.atty, a.att, a.qkv, b, t, ca, nh);
  row_parallel(a.res2, a.atty, kProjW, kProjB, x, ca);
  ops::LayerNormForward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, w(kLn2W), w(kLn2B), n, c);
  ops::LinearGeluForward(a.fch, a.fch_gelu, a.ln2, w(kFcW), w(kFcB), n, c, m);
  if (!output) return;
  row_parallel(x_.data() + (l + 1) * nc, a.fch_gelu, kFcProjW, kFcProjB, a.res2, m);
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
  const size_t size = widths_.vocab.size() * config_.n_embd;
  DSLAUNCH_CHECK(last() && !first() && weight.size() == size && gradient.size() == size)
      << "a tied head of " << weight.size() << " and " << gradient.size() << " values for a [" << widths_.vocab.size()
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
  const int n = b_ * t_, c = config_.n_embd, v = static_cast<int>(widths_.vocab.size());
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
  const int n = b_ * t_, c = config_.n_embd, v = static_cast<int>(widths_.vocab.size());
  // Loss -> logits -> the final norm's output (mean loss: each row's share is 1/n). Split, the
  // one-hot is at the targets in this rank's rows, and the final norm's gradient is summed over
  // the group.
  std::fill(dlogits_.begin(), dlogits_.begin() + static_cast<size_t>(n) * v, 0.0f);
  ops::CrossEntropyBackward(dlogits_.data(), probs_.data(), split() ? local_targets_.data() : targets_.data(),
                            loss_scale / n, n, v);
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
  GroupSum(dlnf_.data(), static_cast<size_t>(n) * c);
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
    if (split()) {  // each token's row from the rank that holds it, then its position's
      ops::EmbeddingRowsForward(x_.data(), tokens, emb.data(), static_cast<int>(widths_.vocab.begin),
                                static_cast<int>(widths_.vocab.end), n, c);
      GroupSum(x_.data(), nc);
      ops::AddPositionEmbedding(x_.data(), emb.data() + wpe_offset_, b, t, c);
    } else {
      ops::EmbeddingForward(x_.data(), tokens, emb.data(), emb.data() + wpe_offset_, b, t, c);
    }
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
  if (split()) {
    const int v = static_cast<int>(widths_.vocab.size());
    for (int i = 0; i < n; ++i) local_targets_[i] = targets_[i] - static_cast<int>(widths_.vocab.begin);
    ops::SplitSoftmaxMax(row_max_.data(), logits_.data(), n, v);
    GroupMax(row_max_.data(), n);
    ops::SplitSoftmaxExp(row_sum_.data(), probs_.data(), logits_.data(), row_max_.data(), n, v);
    GroupSum(row_sum_.data(), n);
    ops::SplitCrossEntropyForward(losses_.data(), probs_.data(), row_sum_.data(), targets_.data(),
                                  static_cast<int>(widths_.vocab.begin), n, v);
    GroupSum(losses_.data(), n);
  } else {
    ops::CrossEntropyForward(losses_.data(), probs_.data(), logits_.data(), targets_.data(), n, config_.vocab_size);
  }
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += losses_[i];
  return static_cast<float>(sum / n);
}

void GptModel::BackwardPart(ParameterAccess& params, float loss_scale, const float* output_gradient) {
  const int b = b_, t = t_, n = b * t, c = config_.n_embd, nh = widths_.heads, ca = widths_.attn, m = widths_.mlp;
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
    // Each scratch gradient is written (kSet) before it is read, so none is zeroed first. Split,
    // the gradients of c_fc's and c_attn's inputs are this rank's units' share, summed over the
    // group before the layer norms' backward (the c_proj's take the whole output gradient).
    ops::LinearBackward(dfch_gelu_.data(), dw(kFcProjW), dw(kFcProjB), dx_.data(), a.fch_gelu, w(kFcProjW), n, m,
                        c, ops::GradMode::kSet);
    ops::GeluBackwardBias(dfch_.data(), dw(kFcB), dfch_gelu_.data(), a.fch, n, m);
    ops::LinearBackward(dtmp_c_.data(), dw(kFcW), nullptr, dfch_.data(), a.ln2, w(kFcW), n, c, m,
                        ops::GradMode::kSet);
    GroupSum(dtmp_c_.data(), nc);
    ops::LayerNormBackward(dx_.data(), dw(kLn2W), dw(kLn2B), dtmp_c_.data(), a.res2, w(kLn2W), a.ln2_mean,
                           a.ln2_rstd, n, c);
    // res2 = x + attn(x): likewise, ln_1's backward adds the attention branch to d(res2).
    ops::LinearBackward(dtmp_c_.data(), dw(kProjW), dw(kProjB), dx_.data(), a.atty, w(kProjW), n, ca, c,
                        ops::GradMode::kSet);
    zero(dqkv_, 3 * static_cast<size_t>(n) * ca);
    ops::AttentionBackward(dqkv_.data(), dtmp_c_.data(), a.qkv, a.att, b, t, ca, nh);
    ops::LinearBackward(dtmp_c2_.data(), dw(kAttnW), dw(kAttnB), dqkv_.data(), a.ln1, w(kAttnW), n, c, 3 * ca,
                        ops::GradMode::kSet);
    GroupSum(dtmp_c2_.data(), nc);
    ops::LayerNormBackward(dx_.data(), dw(kLn1W), dw(kLn1B), dtmp_c2_.data(), x, w(kLn1W), a.ln1_mean,
                           a.ln1_rstd, n, c);
    params.Release(group);
    params.GradientReady(group);
  }

  if (first()) {
    std::span<float> demb = params.Gradient(EmbeddingGroup());
    if (split()) {
      ops::EmbeddingRowsBackward(demb.data(), demb.data() + wpe_offset_, dx_.data(), tokens_.data(),
                                 static_cast<int>(widths_.vocab.begin), static_cast<int>(widths_.vocab.end), b, t, c);
    } else {
      ops::EmbeddingBackward(demb.data(), demb.data() + wpe_offset_, dx_.data(), tokens_.data(), b, t, c);
    }
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
