// Names of swap files (docs/offload.md, "Swap-file layout"): the one place that spells them.
//
//   <nvme_path>/dslaunch-swap/<kind>.rank<R>.pid<P>.swp
//
// kind is "optimizer" (fp32 master weights and moments) or "param" (16-bit parameter partitions);
// R is the rank, P the process that owns the file. The owner holds an exclusive flock on the file
// while it is open, so a file whose lock can be taken belongs to a run that has ended (a crash or
// a kill) and is removed at the next start (RemoveStaleSwapFiles in swap_directory.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dslaunch::runtime::swap {

// The sub-directory of nvme_path that holds every swap file.
inline constexpr std::string_view kSwapDirectoryName = "dslaunch-swap";

enum class SwapKind { kOptimizer, kParam };

struct SwapFileName {
  SwapKind kind = SwapKind::kOptimizer;
  int rank = 0;
  long pid = 0;
  friend bool operator==(const SwapFileName&, const SwapFileName&) = default;
};

std::string_view SwapKindName(SwapKind kind);

// "<nvme_path>/dslaunch-swap".
std::string SwapDirectory(const std::string& nvme_path);
// "<kind>.rank<R>.pid<P>.swp" (the file name alone).
std::string FormatSwapFileName(const SwapFileName& name);
// The parts of a file name made by FormatSwapFileName, or nullopt for any other name (including
// near misses: another kind, a sign, leading zeros, trailing bytes).
std::optional<SwapFileName> ParseSwapFileName(std::string_view file_name);

}  // namespace dslaunch::runtime::swap
