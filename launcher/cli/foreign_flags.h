// torchrun's and DeepSpeed's flags that dslaunch refuses, each with what to do instead
// (docs/cli.md, "torchrun's and DeepSpeed's flags"). The flags dslaunch accepts are ordinary
// options of cli.cc; these are refused before any option is read, so that a command line copied
// from torchrun or DeepSpeed stops at once with advice, never half-way into a job. Pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dslaunch::launcher {

// The refusal of `name` ("--autotuning", either spelling, without "=value"): "--autotuning: ...
// (DeepSpeed's ...); instead ...". Nullopt when `name` is not one of these flags.
std::optional<std::string> RefusalOf(std::string_view name);

// The refused flags' names with underscores, for suggestions: a near miss of one of them is
// offered it, not an unrelated option (--launcher_arg is offered --launcher_args, not --launcher).
std::vector<std::string> RefusedFlagNames();

// DeepSpeed's --launcher values that are MPI launchers (openmpi, mvapich, mpich, impi): the
// refusal, or nullopt for any other value.
std::optional<std::string> RefusalOfLauncher(std::string_view value);

}  // namespace dslaunch::launcher
