#include "launcher/node_mode/node_role.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "common/route.h"

namespace dslaunch::launcher {

NodeRole DecideNodeRole(const NodeRoleFacts& facts) {
  if (facts.node_rank) return *facts.node_rank == 0 ? NodeRole::kHost : NodeRole::kJoin;
  return facts.endpoint_is_local && !facts.port_in_use ? NodeRole::kHost : NodeRole::kJoin;
}

Result<bool> IsAddressOfThisMachine(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0) return InvalidArgumentError("cannot resolve '" + host + "': " + ::gai_strerror(rc));
  bool local = false;
  for (addrinfo* a = found; a != nullptr && !local; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = a->ai_family == AF_INET ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
                                              : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if (::inet_ntop(a->ai_family, raw, text, sizeof(text)) == nullptr) continue;
    local = InterfaceWithAddress(text).ok();
  }
  ::freeaddrinfo(found);
  return local;
}

bool PortInUse(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  // As the endpoint's acceptor does, so that a port in TIME_WAIT is not mistaken for a live one.
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  const bool in_use = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 && errno == EADDRINUSE;
  ::close(fd);
  return in_use;
}

}  // namespace dslaunch::launcher
