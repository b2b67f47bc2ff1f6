#include "launcher/plan/resource_filter.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <utility>

#include "common/text.h"

namespace dslaunch::launcher {
namespace {

// The filter separators (docs/hostfile.md): hosts are separated by '@', a host's slot list follows
// ':' and its slot ids are separated by ','.
constexpr char kNodeSeparator = '@';
constexpr char kSlotListStart = ':';
constexpr char kSlotSeparator = ',';


// "hostfile 'hosts'" or, for LocalHostfile(), "the local host list".
std::string Describe(const Hostfile& hostfile) {
  return hostfile.path.empty() ? std::string("the local host list (no --hostfile)")
                               : "hostfile " + SingleQuoted(hostfile.path);
}

std::vector<int> AllSlots(int count) {
  std::vector<int> slots(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) slots[static_cast<std::size_t>(i)] = i;
  return slots;
}

std::string SlotRange(int count) {
  return count == 1 ? std::string("slot 0") : "slots 0-" + std::to_string(count - 1);
}

// What one filter string says about one host: all of it, or a set of slot ids.
struct HostSelection {
  bool whole = false;
  std::set<int> slots;
};

// Parses a slot id of `spec`: a decimal integer in 0..host.slots-1.
Result<int> ParseSlotId(std::string_view flag, std::string_view spec, std::string_view token,
                        const HostEntry& host, const Hostfile& hostfile) {
  std::string where = std::string(flag) + " " + SingleQuoted(spec);
  if (token.empty()) return InvalidArgumentError(where + ": empty slot id");
  long long id = 0;
  for (char c : token) {
    if (c < '0' || c > '9') {
      return InvalidArgumentError(where + ": slot " + SingleQuoted(token) +
                                  " is not a non-negative integer");
    }
    id = std::min<long long>(id * 10 + (c - '0'), kMaxSlotsPerHost);  // saturate: still out of range
  }
  if (id >= host.slots) {
    std::string origin;
    if (!hostfile.path.empty()) {
      origin = "; " + Describe(hostfile);
      if (host.line > 0) origin += " line " + std::to_string(host.line);
    }
    return InvalidArgumentError(where + ": host " + SingleQuoted(host.host) + " has no slot " +
                                std::string(token) + " (it has " + SlotRange(host.slots) + origin +
                                ")");
  }
  return static_cast<int>(id);
}

// Parses NODE_SPEC[@NODE_SPEC...] into one selection per hostfile entry (indexed like
// hostfile.hosts), validating hosts and slots against the hostfile.
Result<std::vector<HostSelection>> ParseFilter(std::string_view flag, std::string_view text,
                                               const Hostfile& hostfile) {
  std::vector<HostSelection> selections(hostfile.hosts.size());
  std::size_t pos = 0;
  while (true) {
    std::size_t end = text.find(kNodeSeparator, pos);
    std::string_view spec = text.substr(pos, end == std::string_view::npos ? end : end - pos);
    std::string where = std::string(flag) + " " + SingleQuoted(text);
    if (spec.empty()) return InvalidArgumentError(where + ": empty host entry");

    std::string_view host_name;
    std::string_view rest;  // "" or ":SLOT,..."
    if (spec.front() == '[') {
      std::size_t close = spec.find(']');
      if (close == std::string_view::npos) {
        return InvalidArgumentError(std::string(flag) + " " + SingleQuoted(spec) + ": missing ']'");
      }
      host_name = spec.substr(1, close - 1);
      rest = spec.substr(close + 1);
      if (!rest.empty() && rest.front() != kSlotListStart) {
        return InvalidArgumentError(std::string(flag) + " " + SingleQuoted(spec) + ": unexpected " +
                                    SingleQuoted(rest) + " after ']'");
      }
    } else {
      std::size_t colon = spec.find(kSlotListStart);
      host_name = spec.substr(0, colon);
      if (colon != std::string_view::npos) rest = spec.substr(colon);
      if (rest.find(kSlotListStart, 1) != std::string_view::npos) {
        return InvalidArgumentError(std::string(flag) + " " + SingleQuoted(spec) +
                                    ": more than one ':' (write IPv6 hosts in brackets, e.g. "
                                    "'[fe80::1]:0,1')");
      }
    }
    if (host_name.empty()) {
      return InvalidArgumentError(std::string(flag) + " " + SingleQuoted(spec) + ": missing host name");
    }

    auto found = std::find_if(hostfile.hosts.begin(), hostfile.hosts.end(),
                              [&](const HostEntry& h) { return SameHost(h.host, host_name); });
    if (found == hostfile.hosts.end()) {
      return InvalidArgumentError(std::string(flag) + " " + SingleQuoted(spec) + ": host " +
                                  SingleQuoted(host_name) + " is not in " + Describe(hostfile));
    }
    HostSelection& selection = selections[static_cast<std::size_t>(found - hostfile.hosts.begin())];
    if (rest.empty()) {
      selection.whole = true;
    } else {
      std::string_view list = rest.substr(1);
      std::size_t slot_pos = 0;
      while (true) {
        std::size_t slot_end = list.find(kSlotSeparator, slot_pos);
        std::string_view token = list.substr(
            slot_pos, slot_end == std::string_view::npos ? slot_end : slot_end - slot_pos);
        DSLAUNCH_ASSIGN_OR_RETURN(int id, ParseSlotId(flag, spec, token, *found, hostfile));
        selection.slots.insert(id);
        if (slot_end == std::string_view::npos) break;
        slot_pos = slot_end + 1;
      }
    }
    if (end == std::string_view::npos) break;
    pos = end + 1;
  }
  return selections;
}

Result<Resources> ApplyInclude(const Hostfile& hostfile, const std::string& include) {
  DSLAUNCH_ASSIGN_OR_RETURN(auto selections, ParseFilter("--include", include, hostfile));
  Resources resources;
  for (std::size_t i = 0; i < hostfile.hosts.size(); ++i) {
    const HostEntry& host = hostfile.hosts[i];
    const HostSelection& selection = selections[i];
    if (!selection.whole && selection.slots.empty()) continue;
    std::vector<int> slots = selection.whole
                                 ? AllSlots(host.slots)
                                 : std::vector<int>(selection.slots.begin(), selection.slots.end());
    resources.push_back(NodeResources{host.user, host.host, std::move(slots)});
  }
  return resources;
}

Result<Resources> ApplyExclude(const Hostfile& hostfile, const std::string& exclude) {
  DSLAUNCH_ASSIGN_OR_RETURN(auto selections, ParseFilter("--exclude", exclude, hostfile));
  Resources resources;
  for (std::size_t i = 0; i < hostfile.hosts.size(); ++i) {
    const HostEntry& host = hostfile.hosts[i];
    const HostSelection& selection = selections[i];
    if (selection.whole) continue;
    std::vector<int> slots;
    for (int id = 0; id < host.slots; ++id) {
      if (!selection.slots.contains(id)) slots.push_back(id);
    }
    if (!slots.empty()) resources.push_back(NodeResources{host.user, host.host, std::move(slots)});
  }
  if (resources.empty()) {
    return InvalidArgumentError("--exclude " + SingleQuoted(exclude) + " leaves no slot to run on in " +
                                Describe(hostfile));
  }
  return resources;
}

}  // namespace

Result<Resources> SelectResources(const Hostfile& hostfile, const FilterOptions& options) {
  bool has_include = !options.include.empty();
  bool has_exclude = !options.exclude.empty();
  if (has_include && has_exclude) {
    return InvalidArgumentError("--include " + SingleQuoted(options.include) + " and --exclude " +
                                SingleQuoted(options.exclude) + " are mutually exclusive");
  }
  if (has_include || has_exclude) {
    std::string filter = has_include ? "--include " + SingleQuoted(options.include)
                                     : "--exclude " + SingleQuoted(options.exclude);
    if (options.num_nodes.has_value()) {
      return InvalidArgumentError("--num_nodes " + std::to_string(*options.num_nodes) +
                                  " cannot be combined with " + filter);
    }
    if (options.num_gpus.has_value()) {
      return InvalidArgumentError("--num_gpus/--nproc_per_node " +
                                  std::to_string(*options.num_gpus) + " cannot be combined with " +
                                  filter);
    }
  }
  if (hostfile.hosts.empty()) return InvalidArgumentError(Describe(hostfile) + " has no hosts");

  if (has_include) return ApplyInclude(hostfile, options.include);
  if (has_exclude) return ApplyExclude(hostfile, options.exclude);

  std::size_t node_count = hostfile.hosts.size();
  if (options.num_nodes.has_value()) {
    int n = *options.num_nodes;
    if (n < 1) {
      return InvalidArgumentError("--num_nodes must be at least 1, got " + std::to_string(n));
    }
    if (static_cast<std::size_t>(n) > hostfile.hosts.size()) {
      return InvalidArgumentError("--num_nodes " + std::to_string(n) + " but " +
                                  Describe(hostfile) + " has only " +
                                  std::to_string(hostfile.hosts.size()) + " host(s)");
    }
    node_count = static_cast<std::size_t>(n);
  }
  if (options.num_gpus.has_value() && *options.num_gpus < 1) {
    return InvalidArgumentError("--num_gpus/--nproc_per_node must be at least 1, got " +
                                std::to_string(*options.num_gpus));
  }
  if (options.num_gpus.has_value() && *options.num_gpus > kMaxSlotsPerHost) {
    return InvalidArgumentError("--num_gpus/--nproc_per_node " + std::to_string(*options.num_gpus) +
                                " exceeds the limit of " + std::to_string(kMaxSlotsPerHost) +
                                " slots per host");
  }

  Resources resources;
  for (std::size_t i = 0; i < node_count; ++i) {
    const HostEntry& host = hostfile.hosts[i];
    int count = host.slots;
    if (options.num_gpus.has_value()) {
      count = *options.num_gpus;
      if (host.max_slots.has_value() && count > *host.max_slots) {
        return InvalidArgumentError("--num_gpus/--nproc_per_node " + std::to_string(count) +
                                    " exceeds max_slots=" + std::to_string(*host.max_slots) +
                                    " of host " + SingleQuoted(host.host) + " (" + Describe(hostfile) +
                                    " line " + std::to_string(host.line) + ")");
      }
    }
    resources.push_back(NodeResources{host.user, host.host, AllSlots(count)});
  }
  return resources;
}

}  // namespace dslaunch::launcher
