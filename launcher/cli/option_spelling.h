// The two spellings of a long option, and the nearest known name for an unknown one.
//
// DeepSpeed spells its options with underscores (--num_gpus), torchrun with dashes
// (--nproc-per-node, and since PyTorch 2.x both); dslaunch accepts either spelling of every long
// option (docs/cli.md). A suggestion for a mistyped option is written in the user's own spelling,
// so that a torchrun command line is offered torchrun's names. Pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dslaunch::launcher {

// "--nproc-per-node" -> "--nproc_per_node": every '-' after the leading "--" as '_'.
std::string Underscored(std::string_view name);
// "--nproc_per_node" -> "--nproc-per-node": every '_' after the leading "--" as '-'.
std::string Dashed(std::string_view name);

// The name of `known` (long names with their "--") closest to `unknown` once both are written with
// underscores, if it is plausibly what was meant (an edit distance of at most max(2, a third of
// its length)); then written with dashes when `unknown` has a '-' after its "--" and no '_', with
// underscores when it has a '_', and as known otherwise. Empty when none is close.
std::string NearestOption(std::string_view unknown, const std::vector<std::string>& known);

}  // namespace dslaunch::launcher
