#include "launcher/cli/status_options.h"

#include <arpa/inet.h>

#include <cctype>
#include <utility>

namespace dslaunch::launcher {
namespace {

bool IsIpAddress(const std::string& text) {
  unsigned char address[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, text.c_str(), address) == 1 || ::inet_pton(AF_INET6, text.c_str(), address) == 1;
}

// A DNS name (letters, digits, '-' and '.', not starting with '-' or '.') or an IP address.
Status ValidateStatusHost(const std::string& host) {
  if (IsIpAddress(host)) return Status::Ok();
  constexpr size_t kMaxDnsName = 253;
  bool valid = !host.empty() && host.size() <= kMaxDnsName && host.front() != '-' && host.front() != '.';
  for (char c : host) {
    valid = valid && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.');
  }
  if (valid) return Status::Ok();
  const std::string hint = host.find(':') != std::string::npos ? " without a port (any port is accepted)" : "";
  return InvalidArgumentError("--status_host '" + host + "': expected a host name or an IP address" + hint +
                              ", the name a browser uses for this machine");
}

}  // namespace

Status ResolveStatusPage(const StatusArgs& a, CliOptions& o) {
  for (const auto& [given, name] : {std::pair{a.bind_given, "--status_bind " + a.bind},
                                    std::pair{!a.hosts.empty(), std::string("--status_host")},
                                    std::pair{a.metrics_open, std::string("--status_metrics_open")}}) {
    if (given && !a.port_given) return InvalidArgumentError(name + " needs --status_port PORT (0: any free port)");
  }
  if (!a.port_given) return Status::Ok();
  if (a.port < 0 || a.port > 65535) {
    return InvalidArgumentError("--status_port " + std::to_string(a.port) + " is not a TCP port (1-65535, or 0 for any free port)");
  }
  o.status_port = static_cast<uint16_t>(a.port);
  if (a.bind_given) {
    if (!IsIpAddress(a.bind)) {
      return InvalidArgumentError("--status_bind '" + a.bind +
                                  "': expected an IP address (127.0.0.1, 0.0.0.0 for every interface, ::1), not a name");
    }
    o.status_bind = a.bind;
  }
  for (const std::string& host : a.hosts) DSLAUNCH_RETURN_IF_ERROR(ValidateStatusHost(host));
  o.status_hosts = a.hosts;
  o.status_metrics_open = a.metrics_open;
  return Status::Ok();
}

}  // namespace dslaunch::launcher
