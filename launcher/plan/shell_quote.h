// Quoting for POSIX shell command strings.
//
// The command of an SSH exec request is one string that the remote user's login shell runs as
// `$SHELL -c COMMAND`, so every argument dslaunch puts into it is quoted here; `--dry-run` prints
// argv the same way so that a row can be pasted into a shell. Pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dslaunch::launcher {

// Returns `word` as one word for a POSIX shell (sh, dash, bash, ksh, zsh):
// unchanged when it is non-empty, does not start with `=` (zsh expands `=cmd`), and holds only
// [A-Za-z0-9] and `-_./:=,+@%`; otherwise wrapped in single quotes, each `'` written as `'\''`.
// "" -> `''`, "a b" -> `'a b'`, "it's" -> `'it'\''s'`, "~" -> `'~'`, "A=B" -> `A=B`.
// A bare `A=B` as the FIRST word of a command is an assignment, so commands built from these
// words start with a command name (`exec`, `cd`). Precondition: no NUL byte (a shell string cannot
// hold one).
std::string ShellQuote(std::string_view word);

// The words quoted with ShellQuote and joined with single spaces.
std::string ShellJoin(const std::vector<std::string>& words);

}  // namespace dslaunch::launcher
