// zero_optimization.offload_param (docs/offload.md, "Keys"): parsed into the swap layer's
// OffloadParamConfig and checked by its validator, which needs the stage (parameters are offloaded
// only at stage 3, where they are partitioned).
#include <string>

#include "runtime/config/sections.h"

namespace dslaunch::runtime::internal {

Status ParseOffloadParam(Section& root, int stage, const std::string& base_dir, swap::OffloadParamConfig* out) {
  *out = swap::OffloadParamConfig{};
  if (root.HoldsBool("zero_optimization")) return Status::Ok();  // the old form has no sub-sections
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> z, root.Child("zero_optimization"));
  if (!z) return Status::Ok();
  DSLAUNCH_ASSIGN_OR_RETURN(std::optional<Section> p, z->Child("offload_param"));
  if (!p) return Status::Ok();
  std::string device = "none";
  DSLAUNCH_RETURN_IF_ERROR(p->String("device", &device));
  Result<swap::OffloadDevice> parsed = swap::ParseOffloadDevice(device, "zero_optimization.offload_param");
  if (!parsed.ok()) return root.Validated(parsed.status());
  out->device = *parsed;
  DSLAUNCH_RETURN_IF_ERROR(p->String("nvme_path", &out->nvme_path));
  if (!out->nvme_path.empty()) out->nvme_path = ResolvePath(base_dir, out->nvme_path);
  DSLAUNCH_RETURN_IF_ERROR(p->Int("buffer_count", 0, kNoMax, &out->buffer_count));
  int64_t buffer_size = static_cast<int64_t>(out->buffer_size);
  DSLAUNCH_RETURN_IF_ERROR(p->Int("buffer_size", 0, kNoMax, &buffer_size));
  out->buffer_size = static_cast<uint64_t>(buffer_size);
  int64_t max_in_cpu = static_cast<int64_t>(out->max_in_cpu);
  DSLAUNCH_RETURN_IF_ERROR(p->Int("max_in_cpu", 0, kNoMax, &max_in_cpu));
  out->max_in_cpu = static_cast<uint64_t>(max_in_cpu);
  DSLAUNCH_RETURN_IF_ERROR(p->Bool("pin_memory", &out->pin_memory));
  DSLAUNCH_RETURN_IF_ERROR(p->Finish());
  DSLAUNCH_RETURN_IF_ERROR(root.Validated(swap::ValidateOffloadParamConfig(*out, stage)));
  if (std::optional<std::string> note = swap::NoteFor(*out)) z->Warn("offload_param", *note);
  return Status::Ok();
}

}  // namespace dslaunch::runtime::internal
