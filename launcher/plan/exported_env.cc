#include "launcher/plan/exported_env.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "common/env_names.h"
#include "launcher/plan/env_contract.h"
#include "launcher/plan/launch_plan.h"

namespace dslaunch::launcher {
namespace {

using Env = std::map<std::string, std::string>;

// The contract's names, taken from WorkerEnvironment itself so that this list cannot fall behind
// it: an empty plan still sets every contract variable.
const std::set<std::string, std::less<>>& ContractNames() {
  static const std::set<std::string, std::less<>> names = [] {
    std::set<std::string, std::less<>> set;
    for (const auto& [name, value] : WorkerEnvironment(LaunchPlan{}, NodePlan{}, WorkerPlan{}, {})) {
      set.insert(name);
    }
    set.insert(env::kStoreSecretFile);
    // Set only at generation > 0, by the agent, or with --watchdog_timeout.
    set.insert(env::kRestartReason);
    set.insert(env::kFaultTime);
    set.insert(env::kProgressFile);
    set.insert(env::kWatchdogTimeout);
    return set;
  }();
  return names;
}

// Markers of secret-looking names, upper case (LooksSecret compares case-insensitively).
constexpr std::array<std::string_view, 6> kSecretMarkers = {"TOKEN", "SECRET",  "PASSWORD",
                                                            "PASSWD", "KEY", "CREDENTIAL"};

bool ContainsIgnoringCase(std::string_view haystack, std::string_view upper_needle) {
  auto it = std::search(haystack.begin(), haystack.end(), upper_needle.begin(), upper_needle.end(),
                        [](char h, char n) {
                          return std::toupper(static_cast<unsigned char>(h)) ==
                                 static_cast<unsigned char>(n);
                        });
  return it != haystack.end();
}

bool HasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

// Applies one --export token to `env`.
Status ApplyExport(std::string_view token, const Env& launcher_env, Env& env) {
  if (token.empty()) return InvalidArgumentError("--export: empty value; expected NAME or NAME=VALUE");
  std::size_t eq = token.find('=');
  std::string name(token.substr(0, eq));
  if (!IsValidEnvName(name)) {
    // Only the part before '=' is quoted: the value may be a secret.
    return InvalidArgumentError("--export: invalid variable name '" + name +
                                "' (letters, digits and '_', not starting with a digit)");
  }
  if (IsContractVariable(name)) {
    return InvalidArgumentError("--export " + name + ": " + name +
                                " is set by dslaunch for each worker (docs/launch-plan.md) and "
                                "cannot be exported");
  }
  if (eq != std::string_view::npos) {
    std::string_view value = token.substr(eq + 1);
    if (HasNul(value)) return InvalidArgumentError("--export " + name + ": value holds a NUL byte");
    env[name] = std::string(value);
    return Status::Ok();
  }
  auto it = launcher_env.find(name);
  if (it == launcher_env.end()) {
    return InvalidArgumentError("--export " + name + ": " + name +
                                " is not set in the launcher's environment; use --export " + name +
                                "=VALUE to give a value");
  }
  env[name] = it->second;
  return Status::Ok();
}

}  // namespace

bool IsExportedByDefault(std::string_view name) {
  if (std::find(kExportedNames.begin(), kExportedNames.end(), name) != kExportedNames.end()) {
    return true;
  }
  return std::any_of(kExportedPrefixes.begin(), kExportedPrefixes.end(),
                     [name](std::string_view prefix) { return name.starts_with(prefix); });
}

bool IsContractVariable(std::string_view name) { return ContractNames().contains(name); }

bool LooksSecret(std::string_view name) {
  return std::any_of(kSecretMarkers.begin(), kSecretMarkers.end(),
                     [name](std::string_view marker) { return ContainsIgnoringCase(name, marker); });
}

std::string RedactUrlCredentials(std::string_view value) {
  constexpr std::string_view kSchemeEnd = "://";
  // The authority (USERINFO@HOST:PORT) ends at the path, query or fragment, or at a blank or a
  // list separator of the value around the URL.
  constexpr std::string_view kAuthorityEnd = "/?# \t\n,;";
  std::string out;
  std::size_t pos = 0;
  while (true) {
    std::size_t scheme = value.find(kSchemeEnd, pos);
    if (scheme == std::string_view::npos) break;
    std::size_t start = scheme + kSchemeEnd.size();
    std::size_t end = value.find_first_of(kAuthorityEnd, start);
    if (end == std::string_view::npos) end = value.size();
    std::string_view authority = value.substr(start, end - start);
    std::size_t at = authority.rfind('@');
    out += value.substr(pos, start - pos);
    if (at == std::string_view::npos || at == 0) {
      out += authority;
    } else {
      std::string_view userinfo = authority.substr(0, at);
      std::size_t colon = userinfo.find(':');
      if (colon != std::string_view::npos) out += userinfo.substr(0, colon + 1);
      out += kRedactedUserinfo;
      out += authority.substr(at);
    }
    pos = end;
  }
  out += value.substr(pos);
  return out;
}

std::string RedactValue(std::string_view name, std::string_view value) {
  return LooksSecret(name) ? std::string(kRedacted) : RedactUrlCredentials(value);
}

std::map<std::string, std::string> RedactEnvironment(const std::map<std::string, std::string>& env) {
  Env redacted;
  for (const auto& [name, value] : env) redacted.emplace(name, RedactValue(name, value));
  return redacted;
}

Result<std::map<std::string, std::string>> ExportedEnvironment(const ExportOptions& options) {
  Env env;
  // 1. What DeepSpeed's runner exports from the launcher's environment.
  for (const auto& [name, value] : options.launcher_env) {
    if (IsExportedByDefault(name) && !IsContractVariable(name)) env[name] = value;
  }
  if (!options.working_directory.empty()) {
    auto it = env.find("PYTHONPATH");
    env["PYTHONPATH"] = it == env.end() || it->second.empty()
                            ? options.working_directory
                            : options.working_directory + ":" + it->second;
  }
  // 2. Env files: home before the working directory, so the more specific file wins.
  for (const EnvFile& file : options.env_files) {
    for (const auto& [name, value] : file.entries) {
      // ParseEnvFile never yields these, but EnvFile may be built by hand.
      if (!IsValidEnvName(name)) {
        return InvalidArgumentError(file.path + ": invalid variable name '" + name + "'");
      }
      if (HasNul(value)) {
        return InvalidArgumentError(file.path + ": " + name + ": value holds a NUL byte");
      }
      if (!IsContractVariable(name)) env[name] = value;
    }
  }
  // 3. The command line wins over everything.
  for (const std::string& token : options.exports) {
    DSLAUNCH_RETURN_IF_ERROR(ApplyExport(token, options.launcher_env, env));
  }
  return env;
}

}  // namespace dslaunch::launcher
