// What the failure summary adds when a rank died of a mistake a user coming from torchrun or
// DeepSpeed makes at the edges (docs/launcher.md, "Failure summary"): the option that helps,
// recognised from the rank's last stderr lines or its error record. Pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dslaunch::launcher {

// A hint line (without the "dslaunch: " prefix or a newline), or nullopt when nothing is
// recognised. Recognised: argparse's "unrecognized arguments: --local_rank=N" (the program reads
// LOCAL_RANK from the environment, as torchrun scripts do: --no_local_rank), and Python's
// "ModuleNotFoundError: No module named 'M'" (the interpreter is not the user's: --python).
std::optional<std::string> FailureHint(const std::vector<std::string>& stderr_tail, std::string_view error_message);

}  // namespace dslaunch::launcher
