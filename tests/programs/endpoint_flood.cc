// endpoint_flood: a test program that floods a launcher's endpoint with idle unauthenticated
// connections, as an attacker on one node would: it keeps up to N connections open, never
// answers the CHALLENGE, and opens a new one whenever the endpoint closes or refuses one.
// Used by the cluster test of docs/protocol.md, "Connections before authentication"; run it only
// against loopback or the project's own namespaced test hosts.
//
//   endpoint_flood --target HOST:PORT --connections N --seconds S [--ready_file F] [--stop_file F]
//
// --ready_file is created once an attempt of every one of the N connections has completed
// (connected or failed); the flood stops after S seconds or once --stop_file exists. At the end
// it prints one line of counts.
#include <netdb.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "common/endpoint/endpoint_client.h"

namespace {

using Clock = std::chrono::steady_clock;

// epoll_wait's timeout per turn: how soon a failed connect is tried again and the stop file is
// looked at, without spinning while the target is not listening yet.
constexpr int kTurnMs = 10;
constexpr int kMaxEvents = 1024;

struct Counts {
  uint64_t attempts = 0;
  uint64_t connected = 0;
  uint64_t failed = 0;          // connect refused or reset before it completed
  uint64_t closed_by_peer = 0;  // closed or reset by the endpoint after connecting
};

enum class SlotState { kFree, kConnecting, kOpen };

struct Slot {
  int fd = -1;
  SlotState state = SlotState::kFree;
  bool answered = false;  // an attempt of this slot has completed (connected or failed)
};

int Usage() {
  std::fprintf(stderr,
               "usage: endpoint_flood --target HOST:PORT --connections N --seconds S "
               "[--ready_file F] [--stop_file F]\n");
  return 2;
}

bool Exists(const std::string& path) { return !path.empty() && ::access(path.c_str(), F_OK) == 0; }

}  // namespace

int main(int argc, char** argv) {
  std::string target, ready_file, stop_file;
  long connections = 0;
  double seconds = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--target") target = argv[i + 1];
    else if (flag == "--connections") connections = std::strtol(argv[i + 1], nullptr, 10);
    else if (flag == "--seconds") seconds = std::strtod(argv[i + 1], nullptr);
    else if (flag == "--ready_file") ready_file = argv[i + 1];
    else if (flag == "--stop_file") stop_file = argv[i + 1];
    else return Usage();
  }
  if (argc % 2 != 1 || target.empty() || connections <= 0 || seconds <= 0) return Usage();
  auto hp = dslaunch::ParseHostPort(target);
  if (!hp.ok()) {
    std::fprintf(stderr, "endpoint_flood: %s\n", hp.status().message().c_str());
    return 2;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* ai = nullptr;
  if (::getaddrinfo(hp->host.c_str(), std::to_string(hp->port).c_str(), &hints, &ai) != 0) {
    std::fprintf(stderr, "endpoint_flood: cannot resolve %s\n", hp->host.c_str());
    return 2;
  }
  // As many descriptors as the hard limit allows: the flood, not this program, is the point.
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }

  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  std::vector<Slot> slots(static_cast<size_t>(connections));
  Counts counts;
  bool ready = false;
  auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  auto release = [&](Slot& s) {
    ::epoll_ctl(ep, EPOLL_CTL_DEL, s.fd, nullptr);
    ::close(s.fd);
    s.fd = -1;
    s.state = SlotState::kFree;
  };
  std::vector<epoll_event> events(kMaxEvents);
  while (Clock::now() < end && !Exists(stop_file)) {
    for (size_t i = 0; i < slots.size(); ++i) {
      Slot& s = slots[i];
      if (s.state != SlotState::kFree) continue;
      ++counts.attempts;
      s.fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (s.fd < 0) {
        ++counts.failed;  // out of descriptors: try again next turn
        continue;
      }
      if (::connect(s.fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
        ++counts.failed;
        s.answered = true;
        ::close(s.fd);
        s.fd = -1;
        continue;
      }
      s.state = SlotState::kConnecting;
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP;
      ev.data.u64 = i;
      ::epoll_ctl(ep, EPOLL_CTL_ADD, s.fd, &ev);
    }
    if (!ready && !ready_file.empty()) {
      bool all_answered = true;
      for (const Slot& s : slots) all_answered = all_answered && s.answered;
      if (all_answered) {
        std::ofstream(ready_file) << "ready\n";
        ready = true;
      }
    }
    int n = ::epoll_wait(ep, events.data(), kMaxEvents, kTurnMs);
    for (int k = 0; k < n; ++k) {
      Slot& s = slots[events[k].data.u64];
      if (s.state == SlotState::kConnecting) {
        int err = 0;
        socklen_t len = sizeof(err);
        ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        s.answered = true;
        if (err != 0) {
          ++counts.failed;
          release(s);
          continue;
        }
        ++counts.connected;
        s.state = SlotState::kOpen;
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLRDHUP;
        ev.data.u64 = events[k].data.u64;
        ::epoll_ctl(ep, EPOLL_CTL_MOD, s.fd, &ev);
      }
      if ((events[k].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) == 0) continue;
      char buf[512];
      ssize_t r = ::recv(s.fd, buf, sizeof(buf), MSG_DONTWAIT);  // a CHALLENGE: never answered
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
        ++counts.closed_by_peer;
        release(s);
      }
    }
  }
  uint64_t held = 0;
  for (const Slot& s : slots) held += s.state == SlotState::kOpen ? 1 : 0;
  std::printf("endpoint_flood: %llu attempts, %llu connected, %llu failed to connect, %llu closed by the "
              "endpoint, %llu held at the end\n",
              static_cast<unsigned long long>(counts.attempts),
              static_cast<unsigned long long>(counts.connected),
              static_cast<unsigned long long>(counts.failed),
              static_cast<unsigned long long>(counts.closed_by_peer), static_cast<unsigned long long>(held));
  ::freeaddrinfo(ai);
  return 0;
}
