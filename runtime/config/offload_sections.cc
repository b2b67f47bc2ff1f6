// zero_optimization.offload_optimizer, zero_optimization.offload_param and the top-level aio
// block (docs/train-json.md, docs/offload.md "Keys"): DeepSpeed's keys and defaults, parsed into the swap layer's own structs
// (runtime/swap/offload_config.h) and checked by their validators. Keys that change nothing on
// this CPU runtime are accepted with one warning line each.
#include <limits>
#include <string>

#include "runtime/config/sections.h"

namespace dslaunch::runtime::internal {
namespace {

constexpr int kMaxBufferCount = 1 << 20;  // a bound that catches a misplaced unit, not a real limit

Status ParseOffloadOptimizerBlock(Section& zero, const std::string& base_dir, swap::OffloadOptimizerConfig* out,
                                  BufferKeySources* sources) {
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> block, zero.Child("offload_optimizer"));
  if (!block) return Status::Ok();
  Section& b = *block;
  const size_t errors_before = zero.ErrorCount();
  std::string device = "none";
  b.String("device", &device);
  Result<swap::OffloadDevice> parsed = swap::ParseOffloadDevice(device, "offload_optimizer");
  if (!parsed.ok()) return zero.Validated(parsed.status());
  out->device = *parsed;
  b.String("nvme_path", &out->nvme_path);
  if (!out->nvme_path.empty()) out->nvme_path = ResolvePath(base_dir, out->nvme_path);
  int64_t buffer_count = out->buffer_count;
  b.IntOrAuto("buffer_count", 0, kMaxBufferCount, &buffer_count, &(*sources)[BufferKey::kOptimizerBufferCount]);
  out->buffer_count = static_cast<int>(buffer_count);
  b.Bool("pin_memory", &out->pin_memory);
  // DeepSpeed's read-ahead and write-behind switches: the ring always does both here.
  b.Unimplemented();
  b.Finish();
  if (zero.ErrorCount() != errors_before) return Status::Ok();  // the rules between keys need valid keys
  DSLAUNCH_RETURN_IF_ERROR(zero.Validated(swap::ValidateOffloadOptimizerConfig(*out, "offload_optimizer")));
  for (const swap::KeyNote& note : swap::NotesFor(*out)) b.Warn(note.key, note.text);
  return Status::Ok();
}

Status ParseAio(Section& root, swap::AioConfig* out) {
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> block, root.Child("aio"));
  if (!block) return Status::Ok();
  Section& a = *block;
  const size_t errors_before = root.ErrorCount();
  int64_t block_size = static_cast<int64_t>(out->block_size);
  a.Int("block_size", 0, kNoMax, &block_size);
  out->block_size = static_cast<uint64_t>(block_size);
  a.Int("queue_depth", 0, kNoMax, &out->queue_depth);
  if (a.Has("intra_op_parallelism") && a.Has("thread_count")) {
    a.Report(a.Error("thread_count", "is the older name of intra_op_parallelism; give only one of them"));
  }
  // DeepSpeed's older name for the same setting.
  a.Int("thread_count", 0, kNoMax, &out->intra_op_parallelism);
  a.Int("intra_op_parallelism", 0, kNoMax, &out->intra_op_parallelism);
  a.Bool("single_submit", &out->single_submit);
  a.Bool("overlap_events", &out->overlap_events);
  a.Unimplemented();
  a.Finish();
  if (root.ErrorCount() != errors_before) return Status::Ok();
  DSLAUNCH_RETURN_IF_ERROR(root.Validated(swap::ValidateAioConfig(*out, "aio")));
  if (out->intra_op_parallelism > 1) {
    a.Warn(a.Has("thread_count") ? "thread_count" : "intra_op_parallelism",
           std::to_string(out->intra_op_parallelism) +
               " accepted; one io_uring ring keeps queue_depth requests in flight without extra threads");
  }
  return Status::Ok();
}

}  // namespace

Status ParseOptimizerOffload(Section& root, const std::string& base_dir, swap::OffloadOptimizerConfig* offload,
                             swap::AioConfig* aio, BufferKeySources* sources) {
  *offload = swap::OffloadOptimizerConfig{};
  *aio = swap::AioConfig{};
  if (!root.HoldsBool("zero_optimization")) {
    DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> zero, root.Child("zero_optimization"));
    // The two blocks are independent: both are read whatever the other holds.
    if (zero) root.Report(ParseOffloadOptimizerBlock(*zero, base_dir, offload, sources));
  }
  return ParseAio(root, aio);
}

// zero_optimization.offload_param: parsed into the swap layer's OffloadParamConfig and checked by
// its validator, which needs the stage (parameters are offloaded only at stage 3, where they are
// partitioned).
Status ParseOffloadParam(Section& root, int stage, const std::string& base_dir, swap::OffloadParamConfig* out,
                         BufferKeySources* sources) {
  *out = swap::OffloadParamConfig{};
  if (root.HoldsBool("zero_optimization")) return Status::Ok();  // the old form has no sub-sections
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> z, root.Child("zero_optimization"));
  if (!z) return Status::Ok();
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> p, z->Child("offload_param"));
  if (!p) return Status::Ok();
  const size_t errors_before = root.ErrorCount();
  std::string device = "none";
  p->String("device", &device);
  Result<swap::OffloadDevice> parsed = swap::ParseOffloadDevice(device, "zero_optimization.offload_param");
  if (!parsed.ok()) return root.Validated(parsed.status());
  out->device = *parsed;
  p->String("nvme_path", &out->nvme_path);
  if (!out->nvme_path.empty()) out->nvme_path = ResolvePath(base_dir, out->nvme_path);
  int64_t buffer_count = out->buffer_count;
  p->IntOrAuto("buffer_count", 0, std::numeric_limits<int>::max(), &buffer_count,
               &(*sources)[BufferKey::kParamBufferCount]);
  out->buffer_count = static_cast<int>(buffer_count);
  int64_t buffer_size = static_cast<int64_t>(out->buffer_size);
  p->IntOrAuto("buffer_size", 0, kNoMax, &buffer_size, &(*sources)[BufferKey::kParamBufferSize]);
  out->buffer_size = static_cast<uint64_t>(buffer_size);
  int64_t max_in_cpu = static_cast<int64_t>(out->max_in_cpu);
  p->IntOrAuto("max_in_cpu", 0, kNoMax, &max_in_cpu, &(*sources)[BufferKey::kParamMaxInCpu]);
  out->max_in_cpu = static_cast<uint64_t>(max_in_cpu);
  p->Bool("pin_memory", &out->pin_memory);
  p->Finish();
  if (root.ErrorCount() != errors_before) return Status::Ok();  // the rules between keys need valid keys
  DSLAUNCH_RETURN_IF_ERROR(root.Validated(swap::ValidateOffloadParamConfig(*out, stage)));
  for (const swap::KeyNote& note : swap::NotesFor(*out)) p->Warn(note.key, note.text);
  return Status::Ok();
}

}  // namespace dslaunch::runtime::internal
