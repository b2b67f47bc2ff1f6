// Slurm's compact node lists, expanded: the hostlist expressions of SLURM_JOB_NODELIST
// ("node[01-04,07],gpu-[1-3]") and the task counts of SLURM_TASKS_PER_NODE ("2(x3),1").
// Pure; the grammar and where it departs from Slurm's own parser are in docs/slurm.md.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dslaunch::launcher {

// The most hosts one expression may name: past the largest clusters (12k nodes), and a bound on
// what a typo such as "n[1-99999999]" may allocate.
inline constexpr size_t kMaxHostlistHosts = 100000;

// The host names of `expression`, in order, duplicates kept, as `scontrol show hostnames` gives
// them. Hosts are separated by commas or blanks outside brackets; a host is literal text and
// bracket groups "[R,R,...]", each R a number N or a range N-M (N <= M), zero-padded to the width
// of N as written; several groups expand as nested loops, the first one slowest. Errors
// (kInvalidArgument, naming the offset and the part): an empty group or range, N > M, a bracket
// that is not closed or not opened, text after the last group ("a[1-2]b", which Slurm refuses
// too), a non-digit in a range, more than kMaxHostlistHosts hosts.
Result<std::vector<std::string>> ExpandHostlist(std::string_view expression);

// The per-node counts of SLURM_TASKS_PER_NODE: "2(x3),1" -> {2, 2, 2, 1}. Each item is a count,
// or a count with "(xK)" repeating it K times. kInvalidArgument for anything else, a count below
// 1, or more than kMaxHostlistHosts nodes.
Result<std::vector<int>> ExpandTasksPerNode(std::string_view spec);

}  // namespace dslaunch::launcher
