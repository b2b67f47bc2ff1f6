#include "launcher/status/connection_pool.h"

namespace dslaunch::launcher {

PoolAdmission ConnectionPool::Admit(const std::string& client) {
  std::optional<ConnectionId> victim;
  if (from(client) >= limits_.per_client) {
    victim = OldestIdle(&client);
    if (!victim) return {PoolAdmission::Kind::kClientFull, 0, std::nullopt};
  } else if (entries_.size() >= limits_.total) {
    victim = OldestIdle(nullptr);
    if (!victim) return {PoolAdmission::Kind::kPoolFull, 0, std::nullopt};
  }
  if (victim) Release(*victim);
  const ConnectionId id = next_id_++;
  entries_.emplace(id, Entry{client, true, next_wait_++});
  ++per_client_[client];
  return {PoolAdmission::Kind::kAdmitted, id, victim};
}

void ConnectionPool::SetIdle(ConnectionId id, bool idle) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  it->second.idle = idle;
  if (idle) it->second.idle_since = next_wait_++;
}

void ConnectionPool::Release(ConnectionId id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  auto count = per_client_.find(it->second.client);
  if (--count->second == 0) per_client_.erase(count);
  entries_.erase(it);
}

size_t ConnectionPool::from(const std::string& client) const {
  auto it = per_client_.find(client);
  return it == per_client_.end() ? 0 : it->second;
}

std::optional<ConnectionId> ConnectionPool::OldestIdle(const std::string* client) const {
  std::optional<ConnectionId> oldest;
  uint64_t since = 0;
  for (const auto& [id, e] : entries_) {
    if (!e.idle || (client != nullptr && e.client != *client)) continue;
    if (!oldest || e.idle_since < since) {
      oldest = id;
      since = e.idle_since;
    }
  }
  return oldest;
}

std::string DescribeRefusal(PoolAdmission::Kind kind, const PoolLimits& limits, const std::string& client,
                            const std::string& what) {
  if (kind == PoolAdmission::Kind::kClientFull) {
    return std::to_string(limits.per_client) + " " + what + " from " + client +
           " are open and busy already (the status server's limit per client)";
  }
  return std::to_string(limits.total) + " " + what + " are open and busy already (the status server's limit)";
}

}  // namespace dslaunch::launcher
