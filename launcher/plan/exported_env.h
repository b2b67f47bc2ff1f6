// The exported environment: the variables that travel from the launcher to every worker on every
// node, on top of the worker contract (docs/environment.md). The result goes into
// PlanOptions::extra_env. Also the rule for which names hold secrets, and their redaction in
// anything printed.
//
// Everything here is pure: the launcher's environment and the env files' contents are inputs, read
// at the edge (main.cc, ReadEnvFiles in env_file.h).
#pragma once

#include <array>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "launcher/plan/env_file.h"

namespace dslaunch::launcher {

// Variables of the launcher's environment whose name starts with one of these travel to the
// workers without being asked for: the prefixes DeepSpeed's runner exports (NCCL from its CUDA
// accelerator). Case-sensitive, as in DeepSpeed.
inline constexpr std::array<std::string_view, 4> kExportedPrefixes = {"NCCL", "PYTHON", "UCX", "MLFLOW"};
// ...and these exact names.
inline constexpr std::array<std::string_view, 2> kExportedNames = {"PATH", "LD_LIBRARY_PATH"};

// What is shown instead of the value of a secret-looking variable.
inline constexpr char kRedacted[] = "<redacted>";

struct ExportOptions {
  // The launcher's own environment (read once at the edge, e.g. from `environ`).
  std::map<std::string, std::string> launcher_env;
  // Env files that exist, in reading order (EnvFileCandidates, ReadEnvFiles): later files win.
  std::vector<EnvFile> env_files;
  // `--export` values in command-line order: "NAME" (the launcher's value of NAME) or
  // "NAME=VALUE". Later ones win.
  std::vector<std::string> exports;
  // Absolute working directory of the launch. When not empty it is put in front of the launcher's
  // PYTHONPATH ("DIR" or "DIR:OLD"), as DeepSpeed's runner does for multi-node jobs, so that
  // modules next to the launch directory import on every node. Empty: PYTHONPATH is left as it is.
  std::string working_directory;
};

// The variables for every worker, lowest precedence first, each layer replacing earlier values:
//   1. launcher_env entries with a name in kExportedNames or starting with one of
//      kExportedPrefixes (PYTHONPATH with working_directory in front, when that is set);
//   2. the entries of env_files, file by file, line by line;
//   3. `--export` values, in order.
// Contract variables (IsContractVariable) from layers 1 and 2 are dropped: the contract sets them
// per worker. Fails with kInvalidArgument, naming the token but never its value, for an --export
// that is empty, has an invalid name, names a contract variable, or names a variable the launcher's
// environment does not set; and for a value holding a NUL byte.
Result<std::map<std::string, std::string>> ExportedEnvironment(const ExportOptions& options);

// True when the launcher exports `name` without being asked (kExportedPrefixes, kExportedNames).
bool IsExportedByDefault(std::string_view name);

// True for the names the worker contract sets for each worker (WorkerEnvironment in env_contract.h:
// RANK, WORLD_SIZE, ..., CUDA_VISIBLE_DEVICES, DSLAUNCH_STORE, ...), and for
// DSLAUNCH_STORE_SECRET_FILE, which the agent sets. OMP_NUM_THREADS is not one: the user may set it.
bool IsContractVariable(std::string_view name);

// True when the value of `name` must never be printed: the name contains, ignoring case, one of
// TOKEN, SECRET, PASSWORD, PASSWD, KEY or CREDENTIAL (HF_TOKEN, AWS_SECRET_ACCESS_KEY, WANDB_API_KEY,
// MLFLOW_TRACKING_PASSWORD). A plain substring test on purpose: a false positive (KEYBOARD,
// MONKEY_PATCH) only hides a harmless value from a log, while a cleverer rule risks showing a secret.
bool LooksSecret(std::string_view name);

// What replaces the password (or the whole userinfo) of a URL in a printed value.
inline constexpr char kRedactedUserinfo[] = "***";

// `value` with the credentials of every URL in it hidden: in each "SCHEME://USERINFO@HOST...",
// "user:password" becomes "user:***" and a userinfo without ':' (often a token used as the user
// name) becomes "***". "https://bob:pass@host/x" -> "https://bob:***@host/x". Text that is not a
// URL is unchanged.
std::string RedactUrlCredentials(std::string_view value);

// kRedacted when LooksSecret(name), else RedactUrlCredentials(value)
// (MLFLOW_TRACKING_URI=https://bob:***@host).
std::string RedactValue(std::string_view name, std::string_view value);

// A copy of `env` with every value passed through RedactValue: for dry runs and logs.
std::map<std::string, std::string> RedactEnvironment(const std::map<std::string, std::string>& env);

}  // namespace dslaunch::launcher
