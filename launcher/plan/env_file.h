// Env files: `.dslaunch_env` and `.deepspeed_env`, KEY=VALUE lines whose variables travel to every
// worker (docs/environment.md, "Env files", is the grammar this code implements).
//
// ParseEnvFile and EnvFileCandidates are pure; ReadEnvFile and ReadEnvFiles do the file I/O.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace dslaunch::launcher {

// (name, value) pairs in file order. A name may repeat; the later entry wins when applied.
using EnvEntries = std::vector<std::pair<std::string, std::string>>;

// One env file that was read: its path (for messages) and its entries.
struct EnvFile {
  std::string path;
  EnvEntries entries;
};

// File names looked for, in reading order within one directory: DeepSpeed's name first, so that
// dslaunch's own file wins over it.
inline constexpr char kDeepSpeedEnvFileName[] = ".deepspeed_env";
inline constexpr char kDslaunchEnvFileName[] = ".dslaunch_env";

// An env file is a few lines of configuration; anything larger is a mistake (a log, a binary),
// and refusing it keeps a stray file from being read into memory whole.
inline constexpr std::size_t kMaxEnvFileBytes = 1 << 20;

// Parses the text of an env file. Grammar (docs/environment.md):
//   - lines end at '\n'; a '\r' before it is dropped; a UTF-8 byte order mark at the start is skipped;
//   - blank lines and lines whose first non-blank character is '#' are skipped;
//   - otherwise `[export ]NAME=VALUE`, blanks allowed around the line, after `export` and around '=';
//   - NAME is [A-Za-z_][A-Za-z0-9_]*;
//   - VALUE is unquoted (the rest of the line, outer blanks removed, '#' kept), or in single quotes
//     (literal, no escapes), or in double quotes (only \" \\ and \$ are escapes; any other
//     backslash is kept); after the closing quote only blanks, optionally followed by a `#` comment
//     after at least one blank, may follow;
//   - an unescaped '$' outside single quotes is an error: dslaunch does not expand variables, and a
//     value written for a shell (`PATH=/opt/bin:$PATH`) must not reach the workers as "$PATH".
// Returns the entries in file order, or kInvalidArgument "PATH:LINE: what is wrong". Error messages
// name the variable when one was read but never quote a value or an unparsed line (it may be a
// secret).
Result<EnvEntries> ParseEnvFile(std::string_view text, std::string_view path);

// Reads and parses the env file at `path`. Returns std::nullopt when no file is there (ENOENT, or a
// path component is not a directory), the entries when it parsed, and kInvalidArgument for a parse
// error, a file over kMaxEnvFileBytes, or a file that exists but cannot be read (permission denied,
// a directory): "PATH: cannot read: <reason>". The user has to fix all of these; none is retried.
Result<std::optional<EnvEntries>> ReadEnvFile(const std::string& path);

// The env files to look for, in reading order (later files win): in `home_dir`, then in
// `working_dir`, each `.deepspeed_env` then `.dslaunch_env` (DeepSpeed reads home, then the
// working directory). An empty directory is skipped, and `working_dir` is skipped when it names
// the same directory as `home_dir` textually (ignoring trailing '/'), so no file is read twice.
std::vector<std::string> EnvFileCandidates(std::string_view home_dir, std::string_view working_dir);

// Reads every path with ReadEnvFile, in order, and returns the files that exist. Stops at the first
// error and returns it.
Result<std::vector<EnvFile>> ReadEnvFiles(const std::vector<std::string>& paths);

// True when `name` is a valid environment variable name for dslaunch: [A-Za-z_][A-Za-z0-9_]*.
bool IsValidEnvName(std::string_view name);

}  // namespace dslaunch::launcher
