#include "launcher/plan/hostfile.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "common/text.h"
#include "common/unique_fd.h"

namespace dslaunch::launcher {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
// Characters of a host name label, and of a POSIX portable user name.
bool IsNameChar(char c) { return IsAlnum(c) || c == '-' || c == '.' || c == '_'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> SplitBlanks(std::string_view s) {
  std::vector<std::string_view> tokens;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && IsBlank(s[i])) ++i;
    std::size_t start = i;
    while (i < s.size() && !IsBlank(s[i])) ++i;
    if (i > start) tokens.push_back(s.substr(start, i - start));
  }
  return tokens;
}


// "fe80::1" or "fe80::1%eth0" (a zone id names the link of a link-local address).
bool IsIpv6Address(std::string_view s) {
  std::string_view zone;
  if (std::size_t pct = s.find('%'); pct != std::string_view::npos) {
    zone = s.substr(pct + 1);
    s = s.substr(0, pct);
    if (zone.empty()) return false;
    for (char c : zone) {
      if (!IsNameChar(c)) return false;
    }
  }
  // inet_pton is a pure conversion (no resolver, no I/O); it needs a NUL-terminated string.
  std::string address(s);
  in6_addr parsed{};
  return inet_pton(AF_INET6, address.c_str(), &parsed) == 1;
}

// A DNS name or an IPv4 address: starts with a letter or digit (never '-', which ssh would read as
// an option), then letters, digits, '-', '.', '_'.
bool IsHostName(std::string_view s) {
  if (s.empty() || !IsAlnum(s.front())) return false;
  for (char c : s) {
    if (!IsNameChar(c)) return false;
  }
  return true;
}

bool IsUserName(std::string_view s) {
  if (s.empty() || s.front() == '-') return false;
  for (char c : s) {
    if (!IsNameChar(c)) return false;
  }
  return true;
}

// Splits "[user@]host" and validates both parts. On error returns the message (no location).
Result<std::pair<std::string, std::string>> ParseHostSpec(std::string_view spec) {
  if (spec.find('=') != std::string_view::npos) {
    return InvalidArgumentError("missing host before " + SingleQuoted(spec));
  }
  std::string_view user;
  std::string_view host = spec;
  if (std::size_t at = spec.find('@'); at != std::string_view::npos) {
    user = spec.substr(0, at);
    host = spec.substr(at + 1);
    if (host.find('@') != std::string_view::npos) {
      return InvalidArgumentError("invalid host " + SingleQuoted(spec) + ": more than one '@'");
    }
    if (!IsUserName(user)) {
      return InvalidArgumentError("invalid user name " + SingleQuoted(user) + " in " + SingleQuoted(spec) +
                                  " (letters, digits, '.', '_', '-'; not starting with '-')");
    }
  }
  if (host.empty()) return InvalidArgumentError("missing host name in " + SingleQuoted(spec));
  if (host.front() == '[') {
    if (host.size() < 2 || host.back() != ']' || !IsIpv6Address(host.substr(1, host.size() - 2))) {
      return InvalidArgumentError("invalid bracketed IPv6 address " + SingleQuoted(host));
    }
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    if (!IsIpv6Address(host)) return InvalidArgumentError("invalid IPv6 address " + SingleQuoted(host));
  } else if (!IsHostName(host)) {
    return InvalidArgumentError("invalid host name " + SingleQuoted(host) +
                                " (letters, digits, '.', '_', '-'; starting with a letter or digit)");
  }
  return std::make_pair(std::string(user), std::string(host));
}

// Parses the value of slots= / max_slots=: a decimal integer in 1..kMaxSlotsPerHost.
Result<int> ParseSlotCount(std::string_view key, std::string_view value) {
  if (value.empty()) return InvalidArgumentError("missing value for " + std::string(key) + "=");
  bool negative = value.front() == '-';
  std::string_view digits = negative ? value.substr(1) : value;
  bool all_digits = !digits.empty();
  for (char c : digits) all_digits = all_digits && IsDigit(c);
  if (!all_digits) {
    return InvalidArgumentError(std::string(key) + " must be a positive integer, got " + SingleQuoted(value));
  }
  if (negative) {
    return InvalidArgumentError(std::string(key) + " must be at least 1, got " + std::string(value));
  }
  long long n = 0;
  for (char c : digits) {
    n = n * 10 + (c - '0');
    if (n > kMaxSlotsPerHost) {
      return InvalidArgumentError(std::string(key) + "=" + std::string(value) +
                                  " exceeds the limit of " + std::to_string(kMaxSlotsPerHost) +
                                  " slots per host (docs/hostfile.md)");
    }
  }
  if (n == 0) return InvalidArgumentError(std::string(key) + " must be at least 1, got 0");
  return static_cast<int>(n);
}

// Parses one non-blank, comment-free line. Errors carry no location; the caller adds it.
Result<HostEntry> ParseHostLine(std::string_view content, int line) {
  std::vector<std::string_view> tokens = SplitBlanks(content);
  HostEntry entry;
  entry.line = line;
  DSLAUNCH_ASSIGN_OR_RETURN(auto user_host, ParseHostSpec(tokens.front()));
  entry.user = std::move(user_host.first);
  entry.host = std::move(user_host.second);

  std::optional<int> slots;
  bool seen_key = false;
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    std::string_view token = tokens[i];
    std::size_t eq = token.find('=');
    if (eq == std::string_view::npos) {
      if (!seen_key) {
        return InvalidArgumentError("malformed line " + SingleQuoted(content) +
                                    ": expected 'HOST slots=N [max_slots=M]' (one host per line)");
      }
      return InvalidArgumentError("trailing junk " + SingleQuoted(token) + " after the host entry");
    }
    seen_key = true;
    std::string_view key = token.substr(0, eq);
    std::string_view value = token.substr(eq + 1);
    if (key == "slots" || key == "max_slots") {
      std::optional<int>& target = key == "slots" ? slots : entry.max_slots;
      if (target.has_value()) return InvalidArgumentError(std::string(key) + "= given twice");
      DSLAUNCH_ASSIGN_OR_RETURN(target, ParseSlotCount(key, value));
    } else {
      return InvalidArgumentError("unknown key " + SingleQuoted(key) + " (expected slots or max_slots)");
    }
  }
  if (!slots.has_value()) {
    return InvalidArgumentError("missing slots=N for host " + SingleQuoted(entry.host));
  }
  entry.slots = *slots;
  if (entry.max_slots.has_value() && *entry.max_slots < entry.slots) {
    return InvalidArgumentError("max_slots=" + std::to_string(*entry.max_slots) +
                                " is less than slots=" + std::to_string(entry.slots));
  }
  return entry;
}

std::string Location(std::string_view path, int line) {
  return std::string(path) + ":" + std::to_string(line);
}

}  // namespace

Result<Hostfile> ParseHostfile(std::string_view text, std::string_view path) {
  Hostfile hostfile;
  hostfile.path = std::string(path);
  int line = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view raw = text.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    // '#' cannot occur in a host, user or number, so everything after it is a comment.
    std::string_view content = Trim(raw.substr(0, raw.find('#')));
    if (content.empty()) continue;

    Result<HostEntry> entry = ParseHostLine(content, line);
    if (!entry.ok()) return entry.status().WithContext(Location(path, line));
    for (const HostEntry& earlier : hostfile.hosts) {
      if (SameHost(earlier.host, entry->host)) {
        return InvalidArgumentError(Location(path, line) + ": duplicate host " + SingleQuoted(entry->host) +
                                    " (first at line " + std::to_string(earlier.line) + ")");
      }
    }
    hostfile.hosts.push_back(std::move(entry).value());
  }
  if (hostfile.hosts.empty()) {
    return InvalidArgumentError(std::string(path) +
                                ": no hosts (only comments and blank lines); expected lines like "
                                "'worker-0 slots=4'");
  }
  return hostfile;
}

Result<Hostfile> ReadHostfile(const std::string& path) {
  std::string where = "hostfile " + SingleQuoted(path);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return NotFoundError(where + " does not exist (omit --hostfile to run on this machine only)");
    }
    if (err == EACCES) return InvalidArgumentError(where + ": permission denied");
    return ErrnoError(where, err);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoError(where, errno);
  if (!S_ISREG(st.st_mode)) return InvalidArgumentError(where + " is not a regular file");
  if (static_cast<std::size_t>(st.st_size) > kMaxHostfileBytes) {
    return InvalidArgumentError(where + " is larger than " + std::to_string(kMaxHostfileBytes) +
                                " bytes; is it the right file?");
  }
  std::string text;
  char buffer[8192];
  while (true) {
    ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("reading " + where, errno);
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > kMaxHostfileBytes) {
      return InvalidArgumentError(where + " is larger than " + std::to_string(kMaxHostfileBytes) +
                                  " bytes; is it the right file?");
    }
  }
  return ParseHostfile(text, path);
}

Hostfile LocalHostfile(int slots) {
  DSLAUNCH_CHECK(slots >= 1) << "LocalHostfile needs at least one slot, got " << slots;
  Hostfile hostfile;
  hostfile.hosts.push_back(HostEntry{.user = "", .host = "localhost", .slots = slots,
                                     .max_slots = std::nullopt, .line = 0});
  return hostfile;
}

bool SameHost(std::string_view a, std::string_view b) {
  auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

bool IsLocalhostName(std::string_view host) { return SameHost(host, "localhost"); }

}  // namespace dslaunch::launcher
