#include "common/route.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <algorithm>
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

Result<HostAddresses> ResolveAndProbe(const std::string& host) {
  std::string name = host;
  if (name.size() > 2 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(name.c_str(), "0", &hints, &found); rc != 0) {
    return InvalidArgumentError("resolving '" + host + "': " + gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(found, &freeaddrinfo);
  HostAddresses out;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const std::string text = AddressText(a->ai_addr);
    if (text.empty() || std::find(out.resolved.begin(), out.resolved.end(), text) != out.resolved.end()) continue;
    out.resolved.push_back(text);
    UniqueFd fd(socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (fd.get() >= 0 && bind(fd.get(), a->ai_addr, a->ai_addrlen) == 0) out.local.push_back(text);
  }
  return out;
}

std::vector<std::string> MachineAddresses() {
  std::vector<std::string> v4, v6;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> guard(list, &freeifaddrs);
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    const std::string text = AddressText(a->ifa_addr);
    if (text.empty() || text.rfind("127.", 0) == 0 || text == "::1" || text.rfind("fe80:", 0) == 0) continue;
    auto& list_of = a->ifa_addr->sa_family == AF_INET ? v4 : v6;
    if (std::find(list_of.begin(), list_of.end(), text) == list_of.end()) list_of.push_back(text);
  }
  v4.insert(v4.end(), v6.begin(), v6.end());
  return v4;
}

}  // namespace dslaunch
