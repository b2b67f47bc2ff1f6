// Routes of this machine: which local address and interface reach a peer. Used to bind Gloo to the
// address of the route to the store (runtime), and to name the interface NCCL should use (agent).
#pragma once

#include <string>

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

}  // namespace dslaunch
