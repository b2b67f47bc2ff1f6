// Routes of this machine: which local address and interface reach a peer. Used to bind Gloo to the
// address of the route to the store (runtime), and to name the interface NCCL should use (agent).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace dslaunch {

// The local IP address the kernel would use to reach `host_port` (host:port, IPv6 in brackets;
// a host name is resolved). Sends nothing. kInvalidArgument for a malformed or unresolvable
// address, kUnavailable if there is no route.
Result<std::string> SourceAddressToward(const std::string& host_port);

// The name of the interface holding the local address `ip` ("lo" for 127.0.0.1). kNotFound when
// no interface has it.
Result<std::string> InterfaceWithAddress(const std::string& ip);

// The interface the kernel would send from to reach `host` on `port` (an IPv6 literal may come
// without brackets): InterfaceWithAddress of SourceAddressToward. Their errors.
Result<std::string> InterfaceToward(const std::string& host, const std::string& port);

// What `host` resolves to (every IPv4 and IPv6 address, in getaddrinfo's order, no duplicates)
// and which of them this machine holds: a TCP socket can be bound to it (port 0, closed at
// once). kInvalidArgument when the name does not resolve.
struct HostAddresses {
  std::vector<std::string> resolved;
  std::vector<std::string> local;  // the subset of `resolved` this machine can bind
};
Result<HostAddresses> ResolveAndProbe(const std::string& host);

// This machine's interface addresses, IPv4 then IPv6, loopback and link-local ones left out.
std::vector<std::string> MachineAddresses();

}  // namespace dslaunch
