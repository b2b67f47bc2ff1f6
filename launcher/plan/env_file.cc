#include "launcher/plan/env_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/unique_fd.h"

namespace dslaunch::launcher {
namespace {

bool IsSpaceOrTab(char c) { return c == ' ' || c == '\t'; }

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && IsSpaceOrTab(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpaceOrTab(s.back())) s.remove_suffix(1);
  return s;
}

// Builds "path:line: message".
Status LineError(std::string_view path, int line, std::string_view message) {
  std::string m(path);
  m += ':';
  m += std::to_string(line);
  m += ": ";
  m += message;
  return InvalidArgumentError(std::move(m));
}

constexpr std::string_view kDollarAdvice =
    "'$' outside single quotes; dslaunch does not expand variables: write the value out, or "
    "put it in single quotes for a literal '$'";

// The quoted value at the start of `text` (which begins with `quote`), with the rest of the line
// after the closing quote in `*rest`. An error message (without location) on failure.
Result<std::string> ParseQuoted(std::string_view text, std::string_view* rest) {
  const char quote = text.front();
  std::string value;
  for (std::size_t i = 1; i < text.size(); ++i) {
    char c = text[i];
    if (c == quote) {
      *rest = text.substr(i + 1);
      return value;
    }
    if (quote == '"') {
      // Only \" \\ and \$ are escapes; any other backslash is kept, as a POSIX shell does inside
      // double quotes, so Windows-style paths and regular expressions survive unchanged.
      if (c == '\\' && i + 1 < text.size() &&
          (text[i + 1] == '"' || text[i + 1] == '\\' || text[i + 1] == '$')) {
        value += text[++i];
        continue;
      }
      if (c == '$') return InvalidArgumentError(std::string(kDollarAdvice));
    }
    value += c;
  }
  return InvalidArgumentError(quote == '"' ? "unterminated double quote (values are one line)"
                                           : "unterminated single quote (values are one line)");
}

// One line without its newline. Returns no entry for a blank or comment line.
Result<std::optional<std::pair<std::string, std::string>>> ParseLine(std::string_view line,
                                                                      std::string_view path,
                                                                      int number) {
  if (line.find('\0') != std::string_view::npos) return LineError(path, number, "NUL byte in line");
  std::string_view text = TrimBlanks(line);
  if (text.empty() || text.front() == '#') return std::optional<std::pair<std::string, std::string>>();

  // `export NAME=VALUE`, so that the same file can be sourced by a shell.
  constexpr std::string_view kExport = "export";
  if (text.size() > kExport.size() && text.substr(0, kExport.size()) == kExport &&
      IsSpaceOrTab(text[kExport.size()])) {
    text = TrimBlanks(text.substr(kExport.size()));
  }

  std::size_t eq = text.find('=');
  // The line is not quoted back: without '=' it may be a pasted secret.
  if (eq == std::string_view::npos) {
    return LineError(path, number, "expected NAME=VALUE, but the line has no '='");
  }
  std::string name(TrimBlanks(text.substr(0, eq)));
  if (!IsValidEnvName(name)) {
    return LineError(path, number,
                     "invalid variable name '" + name +
                         "' (letters, digits and '_', not starting with a digit)");
  }

  std::string_view raw = TrimBlanks(text.substr(eq + 1));
  std::string value;
  if (!raw.empty() && (raw.front() == '"' || raw.front() == '\'')) {
    std::string_view rest;
    Result<std::string> quoted = ParseQuoted(raw, &rest);
    if (!quoted.ok()) return LineError(path, number, name + ": " + quoted.status().message());
    std::string_view after = TrimBlanks(rest);
    // A comment may follow the closing quote, but only after a blank (`"x" # note`); `"x"#y` or
    // `"x"y` are ambiguous between shells and dotenv dialects, so they are errors.
    bool comment = !after.empty() && after.front() == '#' && !rest.empty() && IsSpaceOrTab(rest.front());
    if (!after.empty() && !comment) {
      return LineError(path, number, name + ": unexpected text after the closing quote");
    }
    value = std::move(quoted).value();
  } else {
    if (raw.find('$') != std::string_view::npos) {
      return LineError(path, number, name + ": " + std::string(kDollarAdvice));
    }
    value = std::string(raw);
  }
  return std::optional<std::pair<std::string, std::string>>(
      std::pair(std::move(name), std::move(value)));
}

std::string StripTrailingSlashes(std::string_view dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
  return std::string(dir);
}

std::string JoinPath(std::string_view dir, std::string_view name) {
  std::string path(dir);
  if (path.back() != '/') path += '/';
  path += name;
  return path;
}

Status CannotRead(const std::string& path, std::string_view reason) {
  return InvalidArgumentError(path + ": cannot read: " + std::string(reason));
}

}  // namespace

bool IsValidEnvName(std::string_view name) {
  if (name.empty() || (name.front() >= '0' && name.front() <= '9')) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

Result<EnvEntries> ParseEnvFile(std::string_view text, std::string_view path) {
  constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";
  if (text.substr(0, kByteOrderMark.size()) == kByteOrderMark) text.remove_prefix(kByteOrderMark.size());

  EnvEntries entries;
  int number = 0;
  while (!text.empty()) {
    ++number;
    std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    DSLAUNCH_ASSIGN_OR_RETURN(auto entry, ParseLine(line, path, number));
    if (entry) entries.push_back(std::move(*entry));
  }
  return entries;
}

Result<std::optional<EnvEntries>> ReadEnvFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT || errno == ENOTDIR) return std::optional<EnvEntries>();
    return CannotRead(path, std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return CannotRead(path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return CannotRead(path, "is a directory");

  std::string text;
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      return CannotRead(path, std::strerror(errno));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > kMaxEnvFileBytes) {
      return InvalidArgumentError(path + ": larger than " + std::to_string(kMaxEnvFileBytes) +
                                  " bytes; an env file holds a few KEY=VALUE lines");
    }
  }
  DSLAUNCH_ASSIGN_OR_RETURN(EnvEntries entries, ParseEnvFile(text, path));
  return std::optional<EnvEntries>(std::move(entries));
}

std::vector<std::string> EnvFileCandidates(std::string_view home_dir, std::string_view working_dir) {
  std::vector<std::string> dirs;
  if (!home_dir.empty()) dirs.push_back(StripTrailingSlashes(home_dir));
  if (!working_dir.empty()) {
    std::string dir = StripTrailingSlashes(working_dir);
    if (dirs.empty() || dirs.front() != dir) dirs.push_back(std::move(dir));
  }
  std::vector<std::string> paths;
  for (const std::string& dir : dirs) {
    paths.push_back(JoinPath(dir, kDeepSpeedEnvFileName));
    paths.push_back(JoinPath(dir, kDslaunchEnvFileName));
  }
  return paths;
}

Result<std::vector<EnvFile>> ReadEnvFiles(const std::vector<std::string>& paths) {
  std::vector<EnvFile> files;
  for (const std::string& path : paths) {
    DSLAUNCH_ASSIGN_OR_RETURN(std::optional<EnvEntries> entries, ReadEnvFile(path));
    if (entries) files.push_back({path, std::move(*entries)});
  }
  return files;
}

}  // namespace dslaunch::launcher
