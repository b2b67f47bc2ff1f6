// The runtime's own sections of train.json: model, data, train and checkpoint (docs/train-json.md).
#include <filesystem>

#include "common/snapshot/slot_header.h"
#include "runtime/config/sections.h"

namespace dslaunch::runtime::internal {
namespace {

// train.sample_tokens: keeps generated lengths far from int overflow.
constexpr int64_t kMaxDimension = 1 << 20;
// The bundled tokenizer is byte-level: 256 token ids unless model.vocab_size says otherwise.
constexpr int kByteVocabSize = 256;
// train.watchdog_timeout, seconds: a week; a longer silence is as good as no watchdog (0).
constexpr double kMaxWatchdogTimeout = 7 * 24 * 3600.0;

// Reports each of `keys` that is absent; false when any is.
bool RequireKeys(Section& s, std::initializer_list<std::string_view> keys) {
  bool all = true;
  for (std::string_view key : keys) {
    if (!s.Has(key)) all = s.Report(s.Error(key, "required")) && all;
  }
  return all;
}

// The bounds and the divisibility rule are GptConfig's (runtime/models/gpt.h); the getters' ranges
// use its bounds so that a wrong value is quoted as written.
Status ParseGpt(Section& root, Section& m, GptConfig* gpt) {
  const size_t errors_before = root.ErrorCount();
  RequireKeys(m, {"n_layer", "n_head", "n_embd", "block_size"});
  gpt->vocab_size = kByteVocabSize;
  m.Int("n_layer", 1, kMaxGptLayers, &gpt->n_layer);
  m.Int("n_head", 1, kMaxGptEmbedding, &gpt->n_head);
  m.Int("n_embd", 1, kMaxGptEmbedding, &gpt->n_embd);
  m.Int("block_size", 1, kMaxGptBlockSize, &gpt->block_size);
  m.Int("vocab_size", 1, kMaxGptVocabSize, &gpt->vocab_size);
  if (root.ErrorCount() != errors_before) return Status::Ok();
  return root.Validated(ValidateGptConfig(*gpt));
}

Status ParseMlp(Section& root, Section& m, MlpConfig* mlp) {
  if (!RequireKeys(m, {"layers"})) return Status::Ok();
  std::vector<int64_t> layers;
  if (!m.IntArray("layers", 1, kMaxMlpWidth, &layers)) return Status::Ok();
  mlp->widths.assign(layers.begin(), layers.end());
  return root.Validated(ValidateMlpConfig(*mlp));
}

}  // namespace

std::string ResolvePath(const std::string& base_dir, const std::string& path) {
  if (path.empty() || base_dir.empty() || std::filesystem::path(path).is_absolute()) return path;
  return (std::filesystem::path(base_dir) / path).lexically_normal().string();
}

Status ParseModel(Section& root, const std::string& base_dir, ModelConfig* out, std::string* init_from) {
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> m, root.Child("model"));
  if (!m) return root.Error("model", "required");
  init_from->clear();
  m->String("init_from", init_from);
  if (m->Has("init_from") && init_from->empty()) {
    m->Report(m->Error("init_from", "expected a safetensors file, got \"\""));
  }
  *init_from = ResolvePath(base_dir, *init_from);
  if (!m->Has("type")) return m->Error("type", "required: \"gpt\" or \"mlp\"");
  size_t type = 0;
  // Without a valid type the other keys cannot be read (they depend on it).
  if (!m->Choice("type", {"gpt", "mlp"}, /*ignore_case=*/false, &type)) return Status::Ok();
  if (type == 0) {
    GptConfig gpt;
    Status parsed = ParseGpt(root, *m, &gpt);
    *out = gpt;
    m->Finish();
    return parsed;
  }
  MlpConfig mlp;
  Status parsed = ParseMlp(root, *m, &mlp);
  *out = mlp;
  m->Finish();
  return parsed;
}

Status ParseData(Section& root, const ModelConfig* model, const std::string& base_dir, DataConfig* out) {
  *out = DataConfig{};
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> d, root.Child("data"));
  if (!d) return root.Error("data", "required");
  size_t format = 0;
  d->Choice("format", {"tokens", "idx"}, /*ignore_case=*/false, &format);
  out->format = format == 0 ? DataFormat::kTokens : DataFormat::kIdx;
  const auto* gpt = model != nullptr ? std::get_if<GptConfig>(model) : nullptr;
  if (gpt != nullptr && out->format != DataFormat::kTokens) {
    return d->Error("format", "the gpt model reads \"tokens\"");
  }
  if (model != nullptr && gpt == nullptr && out->format != DataFormat::kIdx) {
    return d->Error(d->Has("format") ? "format" : "train", "the mlp model reads images: set \"format\": \"idx\"");
  }
  RequireKeys(*d, {"train"});
  d->String("train", &out->train);
  d->String("val", &out->val);
  if (out->format == DataFormat::kIdx) {
    if (d->Has("seq_len")) {
      d->Report(d->Error("seq_len", "only for \"format\": \"tokens\" (an image is one sample)"));
      d->Known("seq_len");
    }
    RequireKeys(*d, {"train_labels"});
    d->String("train_labels", &out->train_labels);
    d->String("val_labels", &out->val_labels);
    if (out->val.empty() != out->val_labels.empty()) {
      d->Report(d->Error(out->val.empty() ? "val_labels" : "val", "val and val_labels go together"));
    }
  } else {
    // A sample is seq_len tokens predicting the next seq_len; the position embeddings stop at
    // block_size. seq_len 1 is a bigram model: it trains, and is reported in tokens like any gpt.
    // Without a valid model, seq_len is checked against the largest block_size only.
    out->seq_len = gpt != nullptr ? gpt->block_size : 0;
    d->Int("seq_len", 1, gpt != nullptr ? gpt->block_size : kMaxGptBlockSize, &out->seq_len);
  }
  for (std::string* p : {&out->train, &out->val, &out->train_labels, &out->val_labels}) {
    *p = ResolvePath(base_dir, *p);
  }
  d->Finish();
  return Status::Ok();
}

Status ParseTrainLoop(Section& root, const ModelConfig* model, TrainLoopConfig* out) {
  *out = TrainLoopConfig{};
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> t, root.Child("train"));
  if (!t) return root.Error("train", "required (at least \"steps\")");
  RequireKeys(*t, {"steps"});
  t->Int("steps", 1, kNoMax, &out->steps);
  t->Int("eval_interval", 0, kNoMax, &out->eval_interval);
  t->Int("eval_steps", 1, kNoMax, &out->eval_steps);
  t->Int("sample_tokens", 0, kMaxDimension, &out->sample_tokens);
  t->String("sample_prompt", &out->sample_prompt);
  double watchdog = 0.0;
  t->Double("watchdog_timeout", 0.0, kMaxWatchdogTimeout, &watchdog);
  if (t->Has("watchdog_timeout")) out->watchdog_timeout = watchdog;
  if (out->sample_tokens > 0 && model != nullptr && !std::holds_alternative<GptConfig>(*model)) {
    t->Report(t->Error("sample_tokens", "only the gpt model generates text"));
  }
  t->Finish();
  return Status::Ok();
}

Status ParseCheckpoint(Section& root, const std::string& base_dir, int generation, CheckpointConfig* out) {
  *out = CheckpointConfig{};
  out->restarted = generation > 0;
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> c, root.Child("checkpoint"));
  if (!c) return Status::Ok();
  c->String("dir", &out->dir);
  c->Int("snapshot_interval", 0, kNoMax, &out->snapshot_interval);
  c->Int("snapshot_replicas", 0, snapshot::kMaxReplicas, &out->snapshot_replicas);
  c->Int("interval", 0, kNoMax, &out->interval);
  c->Int("keep_last", 0, kNoMax, &out->keep_last);
  std::string load;
  c->String("load", &load);
  c->Bool("async", &out->async);
  c->Bool("save_on_stop", &out->save_on_stop);
  // DeepSpeed's own "checkpoint" section shares this name.
  c->Unimplemented();
  c->Finish();
  if (load == "auto" || load == "latest") {  // "auto": the newest complete checkpoint in dir, if any
    out->load = CheckpointLoad::kLatest;
    if (out->dir.empty()) c->Report(c->Error("load", "\"" + load + "\" needs \"dir\""));
  } else if (!load.empty()) {
    out->load = CheckpointLoad::kPath;
    out->load_path = ResolvePath(base_dir, load);
  }
  if (out->interval > 0 && out->dir.empty()) return c->Error("interval", "needs \"dir\"");
  out->dir = ResolvePath(base_dir, out->dir);
  // A restart continues the run it restarts (docs/checkpoint.md, "Loading").
  out->resume_newest = generation > 0 && !out->dir.empty();
  return Status::Ok();
}

}  // namespace dslaunch::runtime::internal
