#include "common/route.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "common/unique_fd.h"

namespace dslaunch {
namespace {

// The text form of an interface address, "" for families other than IPv4 and IPv6.
std::string AddressText(const sockaddr* sa) {
  char text[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof(text));
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, text, sizeof(text));
  }
  return text;
}

}  // namespace

Result<std::string> SourceAddressToward(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgumentError("address '" + host_port + "' is not host:port");
  }
  std::string host = host_port.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::string port = host_port.substr(colon + 1);
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return InvalidArgumentError("resolving '" + host_port + "': " + gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(found, &freeaddrinfo);
  // A connected UDP socket sends nothing but makes the kernel choose the route and source.
  UniqueFd fd(socket(found->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return ErrnoError("socket", errno);
  if (connect(fd.get(), found->ai_addr, found->ai_addrlen) != 0) {
    return UnavailableError("no route to " + host_port + ": " + std::strerror(errno));
  }
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len) != 0) {
    return ErrnoError("getsockname", errno);
  }
  char text[INET6_ADDRSTRLEN] = {};
  const void* addr =
      local.ss_family == AF_INET6
          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
          : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
  if (inet_ntop(local.ss_family, addr, text, sizeof(text)) == nullptr)
    return ErrnoError("inet_ntop", errno);
  return std::string(text);
}


Result<std::string> InterfaceWithAddress(const std::string& ip) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return ErrnoError("getifaddrs", errno);
  std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> guard(list, &freeifaddrs);
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr != nullptr && AddressText(a->ifa_addr) == ip) return std::string(a->ifa_name);
  }
  return NotFoundError("no interface has address " + ip);
}

Result<std::string> InterfaceToward(const std::string& host, const std::string& port) {
  const std::string bracketed = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  DSLAUNCH_ASSIGN_OR_RETURN(std::string ip, SourceAddressToward(bracketed + ":" + port));
  return InterfaceWithAddress(ip);
}

}  // namespace dslaunch
