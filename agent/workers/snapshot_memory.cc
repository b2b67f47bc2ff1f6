#include "agent/workers/snapshot_memory.h"

#include <sys/mman.h>

#include <cerrno>

namespace dslaunch::agent {

Result<std::vector<int>> SnapshotMemory::For(int local_rank) {
  std::vector<UniqueFd>& slots = slots_[local_rank];
  while (slots.size() < static_cast<size_t>(kSlots)) {
    const std::string name = "dslaunch-snapshot-local" + std::to_string(local_rank) + "-" + std::to_string(slots.size());
    const int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC);
    if (fd < 0) return ErrnoError("memfd_create " + name, errno);
    slots.emplace_back(fd);
  }
  std::vector<int> fds;
  for (const UniqueFd& fd : slots) fds.push_back(fd.get());
  return fds;
}

std::string SnapshotFdsValue(const std::vector<int>& fds) {
  std::string value;
  for (int fd : fds) value += (value.empty() ? "" : ",") + std::to_string(fd);
  return value;
}

}  // namespace dslaunch::agent
