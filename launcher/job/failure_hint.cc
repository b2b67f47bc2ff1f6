#include "launcher/job/failure_hint.h"

namespace dslaunch::launcher {
namespace {

constexpr std::string_view kUnrecognizedLocalRank = "unrecognized arguments: --local_rank";
constexpr std::string_view kNoModule = "ModuleNotFoundError: No module named ";

// The module a "No module named 'M'" line names, quotes included, or empty.
std::string_view ModuleName(std::string_view line) {
  const size_t at = line.find(kNoModule);
  if (at == std::string_view::npos) return {};
  return line.substr(at + kNoModule.size());
}

std::optional<std::string> HintFor(std::string_view line) {
  if (line.find(kUnrecognizedLocalRank) != std::string_view::npos) {
    return std::string(
        "hint: the program does not take the --local_rank=N argument dslaunch passes to Python programs "
        "(as DeepSpeed's launcher does); add --no_local_rank, and it reads LOCAL_RANK from its environment "
        "(as torchrun's scripts do)");
  }
  if (std::string_view module = ModuleName(line); !module.empty()) {
    return "hint: the workers' Python has no module " + std::string(module) +
           "; give the interpreter that has it with --python PATH (e.g. a virtual environment's bin/python), "
           "or set PYTHON_EXEC";
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> FailureHint(const std::vector<std::string>& stderr_tail, std::string_view error_message) {
  if (auto hint = HintFor(error_message)) return hint;
  // The last recognised line wins: a traceback ends with the exception that ended the program.
  for (auto it = stderr_tail.rbegin(); it != stderr_tail.rend(); ++it) {
    if (auto hint = HintFor(*it)) return hint;
  }
  return std::nullopt;
}

}  // namespace dslaunch::launcher
