// The launcher's own CUDA_VISIBLE_DEVICES, and which resources a job gets with it
// (docs/launch-plan.md, "The launcher's CUDA_VISIBLE_DEVICES"). Pure: the variable's value is an
// input, read at the edge (main.cc).
//
// Every worker's CUDA_VISIBLE_DEVICES is its node's slots, so a value the user set for the
// launcher would otherwise be overwritten, handing workers devices the user had excluded. As in
// DeepSpeed, a local job (no --hostfile) takes the listed devices as its slots; where that would be
// a guess, the combination is refused.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/plan/hostfile.h"
#include "launcher/plan/resource_filter.h"

namespace dslaunch::launcher {

// The resources of a job, and whether its workers must see no device at all.
struct JobResources {
  Resources resources;
  bool no_devices = false;  // the launcher's CUDA_VISIBLE_DEVICES was set and empty
};

// Parses a CUDA_VISIBLE_DEVICES value into device ordinals in the order given: "0,2" -> {0, 2},
// "" -> {} (no device). Spaces around an ordinal are allowed. kInvalidArgument, naming the value,
// for anything else: a UUID ("GPU-...", "MIG-..."), a negative or repeated ordinal, an ordinal of
// kMaxSlotsPerHost or more, an empty item ("0,,1").
Result<std::vector<int>> ParseVisibleDevices(const std::string& value);

// True when a local job's slots come from the machine's GPUs (docs/cli.md, "Default slots from
// the machine's GPUs"): no hostfile, no --num_gpus/--nproc_per_node, and the launcher's
// CUDA_VISIBLE_DEVICES unset (`visible_devices` absent).
bool NeedsGpuDiscovery(bool has_hostfile, const FilterOptions& filter,
                       const std::optional<std::string>& visible_devices);

// Selects the job's resources. `hostfile` absent means a local job (LocalHostfile);
// `visible_devices` is the launcher's CUDA_VISIBLE_DEVICES, absent when unset; `local_gpus` is the
// number of GPUs found on this machine where NeedsGpuDiscovery held (0 otherwise, and on a machine
// without GPUs).
//   - unset: SelectResources as usual; a local job without --num_gpus has `local_gpus` slots,
//     or 1 when that is 0 (a CPU machine runs one worker, as before GPU discovery);
//   - with --hostfile: refused (the hostfile's slots are the devices, on every node);
//   - with --include or --exclude: refused (would slot ids count all devices or the visible ones?);
//   - empty: a local job as usual, with no_devices set (its workers see no device);
//   - ordinals: a local job whose slots are those ordinals (ascending); --num_gpus N takes the
//     first N of them as listed, and more than listed is an error.
// Errors are kInvalidArgument and say what to do instead.
Result<JobResources> SelectJobResources(const std::optional<Hostfile>& hostfile, const FilterOptions& filter,
                                        const std::optional<std::string>& visible_devices, int local_gpus = 0);

}  // namespace dslaunch::launcher
