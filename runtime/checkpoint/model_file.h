// Model export and import (docs/checkpoint.md, "Export and import"): a training checkpoint's
// fp32 master weights as one safetensors file of named parameters, and such a file back into a
// flat buffer.
//
// For the gpt model the file is a Hugging Face GPT-2 checkpoint: the names of the published
// `gpt2` model.safetensors ("wte.weight", "h.0.attn.c_attn.weight", ..., "ln_f.bias"), the four
// linear weights of each block transposed to Conv1D's [in][out] (ours are nn.Linear's [out][in]),
// no lm_head (tied to wte), metadata {"format": "pt"}; with its config.json,
// `transformers.GPT2LMHeadModel.from_pretrained(DIR)` loads it. For the mlp model the file keeps
// our names and layouts ("layers.<i>.weight" [out][in], "layers.<i>.bias").
//
// The naming and layout rules are pure functions of the parameter list (tested without files);
// ExportCheckpoint and ImportParameters are the file-reading and -writing shell around them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "runtime/checkpoint/meta.h"
#include "runtime/core/dtype.h"
#include "runtime/core/param_layout.h"

namespace dslaunch::runtime {

// Where one parameter of the flat buffer goes in an exported file.
struct ExportedTensor {
  std::string name;            // in the file
  std::vector<int64_t> shape;  // in the file: [in][out] for a transposed weight
  uint64_t offset = 0;         // in the flat buffer (elements)
  uint64_t numel = 0;
  bool transposed = false;     // the file holds the transpose of our [rows][cols] matrix
};

// The file tensors for `model`'s parameters (names, shapes, offsets as in meta.json or a
// ParameterLayout), in parameter order. kInvalidArgument for a model other than "gpt" or "mlp",
// or a gpt linear weight that is not 2-D.
Result<std::vector<ExportedTensor>> PlanExport(std::string_view model, const std::vector<CheckpointParameter>& parameters);

// The gpt hyperparameters that the parameter shapes determine (meta.json does not record them):
// n_layer = the number of "h.<i>.ln_1.weight", n_embd and vocab_size from wte [vocab][n_embd],
// block_size from wpe [block][n_embd]. kInvalidArgument when wte or wpe is missing or not 2-D.
struct GptShape {
  int n_layer = 0;
  int n_embd = 0;
  int vocab_size = 0;
  int block_size = 0;
};
Result<GptShape> GptShapeFromParameters(const std::vector<CheckpointParameter>& parameters);

// Hugging Face's config.json for a GPT2LMHeadModel of this shape with n_head heads ("gelu_new",
// layer_norm_epsilon 1e-5, tied embeddings, n_inner left to its default 4 x n_embd), and
// "torch_dtype" naming `dtype`. Precondition: n_head divides n_embd.
std::string HfGpt2ConfigJson(const GptShape& shape, int n_head, DType dtype);

struct ExportOptions {
  DType dtype = DType::kFloat32;  // of every tensor in the file: F32, F16 or BF16 (rounded to nearest even)
  // gpt only: also write config.json into the output file's directory (replacing one there).
  bool hf_config = false;
  // Heads of the gpt model, which meta.json does not record: needed with hf_config, from here
  // or from `train_config`. 0: not given.
  int n_head = 0;
  // A train.json of the run (optional): its model section gives n_head and must match the
  // checkpoint's shapes. Parsed at the checkpoint's world size.
  std::string train_config;
};

struct ExportResult {
  std::string checkpoint;   // the global_step<N> directory exported
  int64_t step = 0;
  size_t tensors = 0;
  uint64_t bytes = 0;       // of the safetensors file
  std::string config_json;  // the config.json written; empty without hf_config
};

// Exports the checkpoint at `checkpoint` (a global_step<N> directory, or a checkpoint directory
// whose `latest` names one) to `out_path`: reads meta.json, verifies every shard against its
// CRC-32C (kDataLoss naming the file), assembles the full fp32 "master" tensor and writes one
// tensor per parameter (PlanExport) with metadata {"format": "pt", "dslaunch_step": "<N>",
// "dslaunch_model": "<model>"}, atomically and fsynced. kNotFound for a missing checkpoint;
// kInvalidArgument for hf_config without n_head, with the mlp model, or a train.json that
// disagrees. Reads every shard once; memory: the fp32 parameters plus the converted copies.
Result<ExportResult> ExportCheckpoint(const std::string& checkpoint, const std::string& out_path,
                                      const ExportOptions& options);
// The same with only a dtype.
Status ExportCheckpoint(const std::string& checkpoint, const std::string& out_path, DType dtype);

// Reads a file written by ExportCheckpoint, or a Hugging Face GPT-2 checkpoint for "gpt", into a
// flat fp32 buffer in `layout`'s order. Tensors may be F32, F16 or BF16 (widened exactly). For gpt,
// names with and without the "transformer." prefix are accepted (not both for one tensor), Conv1D
// weights are transposed back, and "lm_head.weight", "h.<i>.attn.bias" and
// "h.<i>.attn.masked_bias" (tied weights, attention-mask buffers) are ignored. Errors name the file
// and the first problem in layout order: kNotFound for a missing file, kDataLoss for a corrupt one,
// kInvalidArgument for a missing tensor, a wrong shape ("expected [16, 48], found [48, 16]"), an
// unsupported dtype, or a tensor the layout does not have.
Result<std::vector<float>> ImportParameters(const std::string& path, const ParameterLayout& layout, std::string_view model);

}  // namespace dslaunch::runtime
