#include "launcher/plan/visible_devices.h"

#include <algorithm>
#include <set>
#include <string_view>

namespace dslaunch::launcher {
namespace {

constexpr char kVariable[] = "CUDA_VISIBLE_DEVICES";

std::string Shown(const std::string& value) { return std::string(kVariable) + "='" + value + "'"; }

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// The local job when the launcher's CUDA_VISIBLE_DEVICES lists `ids`.
Result<JobResources> LocalJobOnDevices(const FilterOptions& filter, const std::vector<int>& ids,
                                       const std::string& value) {
  // SelectResources checks --num_nodes and --num_gpus (range, per-host limit) on the local list.
  FilterOptions counts{"", "", filter.num_nodes, filter.num_gpus};
  DSLAUNCH_ASSIGN_OR_RETURN(Resources local,
                            SelectResources(LocalHostfile(static_cast<int>(ids.size())), counts));
  const std::size_t wanted = local.front().slots.size();
  if (wanted > ids.size()) {
    return InvalidArgumentError("--num_gpus/--nproc_per_node " + std::to_string(wanted) + " but " + Shown(value) +
                                " in the launcher's environment makes only " + std::to_string(ids.size()) +
                                " device(s) visible; ask for fewer workers or unset " + kVariable);
  }
  std::vector<int> slots(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(wanted));
  std::sort(slots.begin(), slots.end());
  local.front().slots = std::move(slots);
  return JobResources{std::move(local), false};
}

}  // namespace

Result<std::vector<int>> ParseVisibleDevices(const std::string& value) {
  std::vector<int> ids;
  if (TrimSpaces(value).empty()) return ids;
  std::set<int> seen;
  std::string_view rest = value;
  while (true) {
    std::size_t comma = rest.find(',');
    std::string_view item = TrimSpaces(rest.substr(0, comma));
    const std::string where = Shown(value) + ": ";
    if (item.empty()) return InvalidArgumentError(where + "empty item in the list");
    long long id = 0;
    for (char c : item) {
      if (c < '0' || c > '9') {
        return InvalidArgumentError(where + "'" + std::string(item) +
                                    "' is not a device ordinal; dslaunch needs ordinals like 0,2 (not "
                                    "GPU or MIG UUIDs, not negative numbers)");
      }
      id = std::min<long long>(id * 10 + (c - '0'), kMaxSlotsPerHost);  // saturate: still out of range
    }
    if (id >= kMaxSlotsPerHost) {
      return InvalidArgumentError(where + "device " + std::string(item) + " is beyond the limit of " +
                                  std::to_string(kMaxSlotsPerHost) + " slots per host");
    }
    if (!seen.insert(static_cast<int>(id)).second) {
      return InvalidArgumentError(where + "device " + std::to_string(id) + " is listed twice");
    }
    ids.push_back(static_cast<int>(id));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return ids;
}

bool NeedsGpuDiscovery(bool has_hostfile, const FilterOptions& filter,
                       const std::optional<std::string>& visible_devices) {
  return !has_hostfile && !filter.num_gpus && !visible_devices;
}

Result<JobResources> SelectJobResources(const std::optional<Hostfile>& hostfile, const FilterOptions& filter,
                                        const std::optional<std::string>& visible_devices, int local_gpus) {
  if (!visible_devices) {
    const int local_slots = filter.num_gpus.value_or(local_gpus > 0 ? local_gpus : 1);
    Hostfile pool = hostfile ? *hostfile : LocalHostfile(std::clamp(local_slots, 1, kMaxSlotsPerHost));
    DSLAUNCH_ASSIGN_OR_RETURN(Resources resources, SelectResources(pool, filter));
    return JobResources{std::move(resources), false};
  }
  const std::string& value = *visible_devices;
  if (hostfile) {
    return InvalidArgumentError(
        Shown(value) + " is set in the launcher's environment, but with --hostfile the hostfile's slots are the "
        "devices of every node: unset it (env -u " + kVariable + " dslaunch ...) and choose devices with "
        "--include HOST:SLOT,SLOT");
  }
  if (!filter.include.empty() || !filter.exclude.empty()) {
    return InvalidArgumentError(
        Shown(value) + " in the launcher's environment cannot be combined with " +
        (filter.include.empty() ? "--exclude" : "--include") +
        " (do slot ids count every device or only the visible ones?): drop the option to run on the "
        "visible devices, or unset " + kVariable + " to choose slots yourself");
  }
  DSLAUNCH_ASSIGN_OR_RETURN(std::vector<int> ids, ParseVisibleDevices(value));
  if (ids.empty()) {
    FilterOptions counts{"", "", filter.num_nodes, filter.num_gpus};
    Hostfile pool = LocalHostfile(std::clamp(filter.num_gpus.value_or(1), 1, kMaxSlotsPerHost));
    DSLAUNCH_ASSIGN_OR_RETURN(Resources resources, SelectResources(pool, counts));
    return JobResources{std::move(resources), true};
  }
  return LocalJobOnDevices(filter, ids, value);
}

}  // namespace dslaunch::launcher
