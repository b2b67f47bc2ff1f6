#include "launcher/status/status_access.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>
#include <cstring>

#include "common/auth/sha256.h"

namespace dslaunch::launcher {
namespace {

// The longest Host value a refusal quotes: enough for any real name, and no echo of a flood.
constexpr size_t kMaxQuotedHost = 100;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// `s` fit to quote in a one-line message: control and non-ASCII bytes as '?', at most
// kMaxQuotedHost characters.
std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, kMaxQuotedHost)) out += c >= 0x20 && c < 0x7f ? c : '?';
  if (s.size() > kMaxQuotedHost) out += "...";
  return out;
}

// An IP address as its bytes (4 for IPv4 and for an IPv4-mapped IPv6 address, 16 for IPv6);
// nullopt for anything else (a name).
std::optional<std::string> IpBytes(std::string_view text) {
  const std::string s(text);
  unsigned char b[sizeof(in6_addr)];
  if (::inet_pton(AF_INET, s.c_str(), b) == 1) return std::string(reinterpret_cast<char*>(b), 4);
  if (::inet_pton(AF_INET6, s.c_str(), b) != 1) return std::nullopt;
  in6_addr a;
  std::memcpy(&a, b, sizeof(a));
  if (IN6_IS_ADDR_V4MAPPED(&a)) return std::string(reinterpret_cast<char*>(b) + 12, 4);
  return std::string(reinterpret_cast<char*>(b), sizeof(b));
}

bool IsLoopback(const std::string& ip) {
  if (ip.size() == 4) return ip[0] == 127;
  in6_addr a;
  std::memcpy(&a, ip.data(), sizeof(a));
  return IN6_IS_ADDR_LOOPBACK(&a);
}

// The host of a Host header ("name", "name:8080", "[::1]:8080" -> "::1"); nullopt when the
// value is not HOST[:PORT].
std::optional<std::string_view> HostOf(std::string_view host) {
  std::string_view name, port;
  bool has_port = false;
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    name = host.substr(1, close - 1);
    const std::string_view rest = host.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port = rest.substr(1);
      has_port = true;
    }
  } else {
    const size_t colon = host.find(':');
    if (colon != std::string_view::npos && host.find(':', colon + 1) != std::string_view::npos) {
      return std::nullopt;  // an IPv6 address without brackets
    }
    name = host.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = host.substr(colon + 1);
      has_port = true;
    }
  }
  if (name.empty()) return std::nullopt;
  if (has_port && !port.empty()) {  // RFC 9110 allows an empty port after the colon
    int value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value < 1 || value > 65535) return std::nullopt;
  }
  return name;
}

// The token of `Authorization: Bearer TOKEN` (the scheme in any case), nullopt for anything else.
std::optional<std::string> BearerToken(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size() || Lower(authorization.substr(0, kScheme.size())) != kScheme) {
    return std::nullopt;
  }
  std::string_view token = authorization.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  return std::string(token);
}

// Calls `each(item)` for every `&`-separated item of `target`'s query.
template <typename F>
void ForEachQueryItem(std::string_view target, F each) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return;
  std::string_view query = target.substr(q + 1);
  while (true) {
    const size_t amp = query.find('&');
    each(query.substr(0, amp));
    if (amp == std::string_view::npos) return;
    query = query.substr(amp + 1);
  }
}

bool IsTokenItem(std::string_view item) { return item == "token" || item.starts_with("token="); }

StatusReply Refusal(int status, std::string message) {
  return {status, kTextPlain, "status page: " + std::move(message) + "\n", {{"Cache-Control", "no-store"}}};
}

}  // namespace

Status CheckHost(std::optional<std::string_view> host, std::string_view local_address,
                 const std::vector<std::string>& names) {
  if (!host) return InvalidArgumentError("the request has no Host header (HTTP/1.1 requires one)");
  const std::optional<std::string_view> name = HostOf(*host);
  if (!name) return FailedPreconditionError("Host '" + Printable(*host) + "' is not HOST[:PORT]");
  std::string wanted = Lower(*name);
  if (wanted.size() > 1 && wanted.back() == '.') wanted.pop_back();  // "localhost." is localhost
  const std::optional<std::string> local = IpBytes(local_address);
  if (const std::optional<std::string> ip = IpBytes(wanted); ip) {
    if (local && *ip == *local) return Status::Ok();
  } else if (wanted == "localhost" && local && IsLoopback(*local)) {
    return Status::Ok();
  }
  for (const std::string& n : names) {
    if (Lower(n) == wanted) return Status::Ok();
  }
  const bool loopback = local && IsLoopback(*local);
  return FailedPreconditionError("Host '" + Printable(*host) + "' is not this server (" + std::string(local_address) +
                                 (loopback ? " or localhost" : "") +
                                 "): a page that reaches it under another name is refused (DNS rebinding); to open "
                                 "it under a name of this machine, start the job with --status_host NAME");
}

std::vector<std::string> TokenParameters(std::string_view target) {
  std::vector<std::string> tokens;
  ForEachQueryItem(target, [&](std::string_view item) {
    if (IsTokenItem(item)) tokens.emplace_back(item.substr(std::min(item.size(), sizeof("token"))));
  });
  return tokens;
}

std::string WithoutToken(std::string_view target) {
  std::string out(target.substr(0, target.find('?')));
  char separator = '?';
  ForEachQueryItem(target, [&](std::string_view item) {
    if (IsTokenItem(item)) return;
    out += separator;
    out += item;
    separator = '&';
  });
  return out;
}

bool IsPublicPath(std::string_view path) { return path == "/status.css" || path == "/status.js"; }

AccessDecision CheckAccess(const StatusAccess& access, const RequestHead& head, std::string_view local_address) {
  AccessDecision d;
  if (Status host = CheckHost(head.host, local_address, access.host_names); !host.ok()) {
    d.refusal = Refusal(host.code() == StatusCode::kInvalidArgument ? 400 : 403, host.message());
    return d;
  }
  d.target = WithoutToken(head.target);
  const std::string_view path = TargetPath(head.target);
  if (IsPublicPath(path) || (access.metrics_open && path == "/metrics")) return d;
  std::vector<std::string> given = TokenParameters(head.target);
  if (std::optional<std::string> bearer = BearerToken(head.authorization)) given.push_back(std::move(*bearer));
  bool valid = false;
  for (const std::string& t : given) valid = (!access.token.empty() && ConstantTimeEquals(t, access.token)) || valid;
  if (valid) return d;
  d.refusal = Refusal(401, std::string(given.empty() ? "this needs the job's token" : "wrong token") +
                               ": open the URL with ?token= that the launcher printed ('dslaunch: status page at "
                               "...'), or send 'Authorization: Bearer TOKEN' with the token from " +
                               access.token_file + " (readable by the job's user only)");
  d.refusal->headers.emplace_back("WWW-Authenticate", "Bearer realm=\"dslaunch\"");
  return d;
}

}  // namespace dslaunch::launcher
