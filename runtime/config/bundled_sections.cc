// The runtime's own sections of train.json: model, data, train and checkpoint (docs/train-json.md).
#include <filesystem>

#include "runtime/config/sections.h"

namespace dslaunch::runtime::internal {
namespace {

// train.sample_tokens: keeps generated lengths far from int overflow.
constexpr int64_t kMaxDimension = 1 << 20;
// The bundled tokenizer is byte-level: 256 token ids unless model.vocab_size says otherwise.
constexpr int kByteVocabSize = 256;
// train.watchdog_timeout, seconds: a week; a longer silence is as good as no watchdog (0).
constexpr double kMaxWatchdogTimeout = 7 * 24 * 3600.0;

Status RequireKeys(Section& s, std::initializer_list<std::string_view> keys) {
  for (std::string_view key : keys) {
    if (!s.Has(key)) return s.Error(key, "required");
  }
  return Status::Ok();
}

// The bounds and the divisibility rule are GptConfig's (runtime/models/gpt.h); the getters' ranges
// use its bounds so that a wrong value is quoted as written.
Status ParseGpt(Section& root, Section& m, GptConfig* gpt) {
  DSLAUNCH_RETURN_IF_ERROR(RequireKeys(m, {"n_layer", "n_head", "n_embd", "block_size"}));
  gpt->vocab_size = kByteVocabSize;
  DSLAUNCH_RETURN_IF_ERROR(m.Int("n_layer", 1, kMaxGptLayers, &gpt->n_layer));
  DSLAUNCH_RETURN_IF_ERROR(m.Int("n_head", 1, kMaxGptEmbedding, &gpt->n_head));
  DSLAUNCH_RETURN_IF_ERROR(m.Int("n_embd", 1, kMaxGptEmbedding, &gpt->n_embd));
  DSLAUNCH_RETURN_IF_ERROR(m.Int("block_size", 1, kMaxGptBlockSize, &gpt->block_size));
  DSLAUNCH_RETURN_IF_ERROR(m.Int("vocab_size", 1, kMaxGptVocabSize, &gpt->vocab_size));
  return root.Validated(ValidateGptConfig(*gpt));
}

Status ParseMlp(Section& root, Section& m, MlpConfig* mlp) {
  DSLAUNCH_RETURN_IF_ERROR(RequireKeys(m, {"layers"}));
  std::vector<int64_t> layers;
  DSLAUNCH_RETURN_IF_ERROR(m.IntArray("layers", 1, kMaxMlpWidth, &layers));
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
  DSLAUNCH_RETURN_IF_ERROR(m->String("init_from", init_from));
  if (m->Has("init_from") && init_from->empty()) return m->Error("init_from", "expected a safetensors file, got \"\"");
  *init_from = ResolvePath(base_dir, *init_from);
  if (!m->Has("type")) return m->Error("type", "required: \"gpt\" or \"mlp\"");
  size_t type = 0;
  DSLAUNCH_RETURN_IF_ERROR(m->Choice("type", {"gpt", "mlp"}, /*ignore_case=*/false, &type));
  if (type == 0) {
    GptConfig gpt;
    DSLAUNCH_RETURN_IF_ERROR(ParseGpt(root, *m, &gpt));
    *out = gpt;
  } else {
    MlpConfig mlp;
    DSLAUNCH_RETURN_IF_ERROR(ParseMlp(root, *m, &mlp));
    *out = mlp;
  }
  return m->Finish();
}

Status ParseData(Section& root, const ModelConfig& model, const std::string& base_dir, DataConfig* out) {
  *out = DataConfig{};
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> d, root.Child("data"));
  if (!d) return root.Error("data", "required");
  size_t format = 0;
  DSLAUNCH_RETURN_IF_ERROR(d->Choice("format", {"tokens", "idx"}, /*ignore_case=*/false, &format));
  out->format = format == 0 ? DataFormat::kTokens : DataFormat::kIdx;
  const auto* gpt = std::get_if<GptConfig>(&model);
  if (gpt != nullptr && out->format != DataFormat::kTokens) {
    return d->Error("format", "the gpt model reads \"tokens\"");
  }
  if (gpt == nullptr && out->format != DataFormat::kIdx) {
    return d->Error(d->Has("format") ? "format" : "train", "the mlp model reads images: set \"format\": \"idx\"");
  }
  DSLAUNCH_RETURN_IF_ERROR(RequireKeys(*d, {"train"}));
  DSLAUNCH_RETURN_IF_ERROR(d->String("train", &out->train));
  DSLAUNCH_RETURN_IF_ERROR(d->String("val", &out->val));
  if (out->format == DataFormat::kIdx) {
    if (d->Has("seq_len")) return d->Error("seq_len", "only for \"format\": \"tokens\" (an image is one sample)");
    DSLAUNCH_RETURN_IF_ERROR(RequireKeys(*d, {"train_labels"}));
    DSLAUNCH_RETURN_IF_ERROR(d->String("train_labels", &out->train_labels));
    DSLAUNCH_RETURN_IF_ERROR(d->String("val_labels", &out->val_labels));
    if (out->val.empty() != out->val_labels.empty()) {
      return d->Error(out->val.empty() ? "val_labels" : "val", "val and val_labels go together");
    }
  } else {
    // A sample is seq_len tokens predicting the next seq_len; the position embeddings stop at
    // block_size. seq_len 1 is a bigram model: it trains, and is reported in tokens like any gpt.
    out->seq_len = gpt->block_size;
    DSLAUNCH_RETURN_IF_ERROR(d->Int("seq_len", 1, gpt->block_size, &out->seq_len));
  }
  for (std::string* p : {&out->train, &out->val, &out->train_labels, &out->val_labels}) {
    *p = ResolvePath(base_dir, *p);
  }
  return d->Finish();
}

Status ParseTrainLoop(Section& root, const ModelConfig& model, TrainLoopConfig* out) {
  *out = TrainLoopConfig{};
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> t, root.Child("train"));
  if (!t) return root.Error("train", "required (at least \"steps\")");
  DSLAUNCH_RETURN_IF_ERROR(RequireKeys(*t, {"steps"}));
  DSLAUNCH_RETURN_IF_ERROR(t->Int("steps", 1, kNoMax, &out->steps));
  DSLAUNCH_RETURN_IF_ERROR(t->Int("eval_interval", 0, kNoMax, &out->eval_interval));
  DSLAUNCH_RETURN_IF_ERROR(t->Int("eval_steps", 1, kNoMax, &out->eval_steps));
  DSLAUNCH_RETURN_IF_ERROR(t->Int("sample_tokens", 0, kMaxDimension, &out->sample_tokens));
  DSLAUNCH_RETURN_IF_ERROR(t->String("sample_prompt", &out->sample_prompt));
  double watchdog = 0.0;
  DSLAUNCH_RETURN_IF_ERROR(t->Double("watchdog_timeout", 0.0, kMaxWatchdogTimeout, &watchdog));
  if (t->Has("watchdog_timeout")) out->watchdog_timeout = watchdog;
  if (out->sample_tokens > 0 && !std::holds_alternative<GptConfig>(model)) {
    return t->Error("sample_tokens", "only the gpt model generates text");
  }
  return t->Finish();
}

Status ParseCheckpoint(Section& root, const std::string& base_dir, int generation, CheckpointConfig* out) {
  *out = CheckpointConfig{};
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> c, root.Child("checkpoint"));
  if (!c) return Status::Ok();
  DSLAUNCH_RETURN_IF_ERROR(c->String("dir", &out->dir));
  DSLAUNCH_RETURN_IF_ERROR(c->Int("interval", 0, kNoMax, &out->interval));
  DSLAUNCH_RETURN_IF_ERROR(c->Int("keep_last", 0, kNoMax, &out->keep_last));
  std::string load;
  DSLAUNCH_RETURN_IF_ERROR(c->String("load", &load));
  DSLAUNCH_RETURN_IF_ERROR(c->Bool("async", &out->async));
  DSLAUNCH_RETURN_IF_ERROR(c->Bool("save_on_stop", &out->save_on_stop));
  // DeepSpeed's own "checkpoint" section shares this name.
  c->Unimplemented({"tag_validation", "load_universal", "use_node_local_storage", "parallel_write"});
  DSLAUNCH_RETURN_IF_ERROR(c->Finish());
  if (load == "auto" || load == "latest") {  // "auto": the newest complete checkpoint in dir, if any
    out->load = CheckpointLoad::kLatest;
    if (out->dir.empty()) return c->Error("load", "\"" + load + "\" needs \"dir\"");
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
