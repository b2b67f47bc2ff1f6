// CPU lists as Linux and numactl write them: "0-3,8,10-11". The grammar of DeepSpeed's
// --bind_core_list and of the kernel's sysfs lists (/sys/devices/system/node/node0/cpulist,
// .../cpu0/topology/thread_siblings_list). Pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dslaunch {

// The largest CPU id a list may name, plus one: Linux's NR_CPUS tops out at 8192 (x86-64
// MAXSMP), so a larger id is a typo, and the bound keeps "0-999999999" from allocating gigabytes.
inline constexpr int kMaxCpuId = 8192;

// Parses ITEM[,ITEM...], ITEM = N or A-B (A <= B, both included), as DeepSpeed's
// parse_range_list: items ascending and not overlapping, no spaces. "" and "\n" give {} (a
// sysfs list of a node without CPUs); one trailing newline is allowed. kInvalidArgument naming
// the offending item for anything else, e.g. "'3-1': the range ends below its start",
// "'x': not a CPU number", "'2' after '1-4': items must be ascending and must not overlap".
// The caller adds where the list came from.
Result<std::vector<int>> ParseCpuList(std::string_view text);

// The shortest list of `cpus` (ascending, no duplicates): {0,1,2,3,8,10,11} -> "0-3,8,10-11".
// {} -> "".
std::string FormatCpuList(const std::vector<int>& cpus);

}  // namespace dslaunch
