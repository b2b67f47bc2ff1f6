#include "common/store/kv_store.h"

#include <algorithm>
#include <charconv>

namespace dslaunch {
namespace {

Status CheckKey(std::string_view key) {
  if (key.size() > kMaxStoreKeyBytes) {
    return InvalidArgumentError("key of " + std::to_string(key.size()) +
                                " bytes exceeds the limit of " + std::to_string(kMaxStoreKeyBytes));
  }
  return Status::Ok();
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

Status KvStore::Set(std::string_view key, std::string value) {
  DSLAUNCH_RETURN_IF_ERROR(CheckKey(key));
  auto it = data_.find(key);
  size_t old_bytes = it == data_.end() ? 0 : key.size() + it->second.size();
  size_t new_bytes = key.size() + value.size();
  if (bytes_ - old_bytes + new_bytes > kMaxStoreBytes) {
    return FailedPreconditionError("store full: the value would take it past " +
                                   std::to_string(kMaxStoreBytes) + " bytes");
  }
  bytes_ = bytes_ - old_bytes + new_bytes;
  if (it != data_.end()) {
    it->second = std::move(value);
    return Status::Ok();
  }
  auto inserted = data_.emplace(std::string(key), std::move(value)).first;
  OnKeyCreated(inserted->first);
  return Status::Ok();
}

const std::string* KvStore::Get(std::string_view key) const {
  auto it = data_.find(key);
  return it == data_.end() ? nullptr : &it->second;
}

Result<int64_t> KvStore::Add(std::string_view key, int64_t delta) {
  DSLAUNCH_RETURN_IF_ERROR(CheckKey(key));
  int64_t current = 0;
  if (const std::string* v = Get(key)) {
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), current);
    if (ec != std::errc() || end != v->data() + v->size()) {
      return FailedPreconditionError("value is not an integer counter");
    }
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(current, delta, &sum)) {
    return FailedPreconditionError("counter would overflow int64");
  }
  DSLAUNCH_RETURN_IF_ERROR(Set(key, std::to_string(sum)));
  return sum;
}

Result<std::string> KvStore::CompareSet(std::string_view key, std::string_view expected,
                                        std::string desired) {
  DSLAUNCH_RETURN_IF_ERROR(CheckKey(key));
  const std::string* current = Get(key);
  if (current == nullptr) {
    if (!expected.empty()) return std::string(expected);
  } else if (*current != expected) {
    return *current;
  }
  std::string result = desired;
  DSLAUNCH_RETURN_IF_ERROR(Set(key, std::move(desired)));
  return result;
}

bool KvStore::Check(const std::vector<std::string>& keys) const {
  return std::all_of(keys.begin(), keys.end(),
                     [&](const std::string& k) { return Get(k) != nullptr; });
}

void KvStore::Erase(std::map<std::string, std::string, std::less<>>::iterator it) {
  std::string key = it->first;
  bytes_ -= it->first.size() + it->second.size();
  data_.erase(it);
  OnKeyRemoved(key);
}

bool KvStore::Delete(std::string_view key) {
  auto it = data_.find(key);
  if (it == data_.end()) return false;
  Erase(it);
  return true;
}

int64_t KvStore::NumKeys(std::string_view prefix) const {
  if (prefix.empty()) return static_cast<int64_t>(data_.size());
  int64_t n = 0;
  for (auto it = data_.lower_bound(prefix); it != data_.end() && StartsWith(it->first, prefix);
       ++it)
    ++n;
  return n;
}

size_t KvStore::DeletePrefix(std::string_view prefix) {
  return DeletePrefixIf(prefix, [](std::string_view) { return true; });
}

size_t KvStore::DeletePrefixIf(std::string_view prefix,
                               const std::function<bool(std::string_view key)>& doomed) {
  size_t n = 0;
  auto it = data_.lower_bound(prefix);
  while (it != data_.end() && StartsWith(it->first, prefix)) {
    if (!doomed(it->first)) {
      ++it;
      continue;
    }
    Erase(it++);
    ++n;
  }
  return n;
}

bool KvStore::Watch(WaiterId id, std::vector<std::string> keys, TimePoint deadline) {
  DSLAUNCH_CHECK(waiters_.count(id) == 0) << "waiter id " << id << " registered twice";
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  size_t missing = 0;
  for (const auto& k : keys) missing += Get(k) == nullptr ? 1 : 0;
  if (missing == 0) return true;
  std::vector<WatcherList::iterator> positions;
  positions.reserve(keys.size());
  for (const auto& k : keys) {
    WatcherList& list = watchers_by_key_[k];
    positions.push_back(list.insert(list.end(), id));
  }
  deadlines_.emplace(deadline, id);
  waiters_.emplace(id, Waiter{std::move(keys), std::move(positions), missing, deadline});
  return false;
}

void KvStore::OnKeyCreated(const std::string& key) {
  auto it = watchers_by_key_.find(key);
  if (it == watchers_by_key_.end()) return;
  for (WaiterId id : it->second) {
    ++watcher_steps_;
    Waiter& w = waiters_.at(id);
    if (--w.missing == 0) ready_.push_back(id);
  }
}

void KvStore::OnKeyRemoved(const std::string& key) {
  auto it = watchers_by_key_.find(key);
  if (it == watchers_by_key_.end()) return;
  for (WaiterId id : it->second) {
    ++watcher_steps_;
    ++waiters_.at(id).missing;
  }
}

void KvStore::RemoveWaiter(WaiterId id) {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return;
  const Waiter& waiter = it->second;
  for (size_t i = 0; i < waiter.keys.size(); ++i) {
    auto w = watchers_by_key_.find(waiter.keys[i]);
    DSLAUNCH_CHECK(w != watchers_by_key_.end()) << "waiter " << id << " not listed under its key";
    ++watcher_steps_;
    w->second.erase(waiter.positions[i]);  // O(1): no scan of the key's other waiters
    if (w->second.empty()) watchers_by_key_.erase(w);
  }
  deadlines_.erase({it->second.deadline, id});
  waiters_.erase(it);
}

void KvStore::Cancel(WaiterId id) { RemoveWaiter(id); }

std::vector<KvStore::WaiterId> KvStore::TakeReady() {
  std::vector<WaiterId> out;
  std::vector<WaiterId> candidates;
  candidates.swap(ready_);
  for (WaiterId id : candidates) {
    auto it = waiters_.find(id);
    // Stale: cancelled, already taken, or a key it needed was deleted again.
    if (it == waiters_.end() || it->second.missing != 0) continue;
    RemoveWaiter(id);
    out.push_back(id);
  }
  return out;
}

std::vector<KvStore::WaiterId> KvStore::TakeExpired(TimePoint now) {
  std::vector<WaiterId> out;
  for (auto it = deadlines_.begin(); it != deadlines_.end() && it->first <= now;) {
    WaiterId id = it->second;
    ++it;  // RemoveWaiter erases the element just passed, which leaves `it` valid
    // A waiter that became ready but was not collected yet has its keys: TakeReady returns it.
    if (waiters_.at(id).missing == 0) continue;
    RemoveWaiter(id);
    out.push_back(id);
  }
  return out;
}

std::optional<KvStore::TimePoint> KvStore::NextDeadline() const {
  if (deadlines_.empty()) return std::nullopt;
  return deadlines_.begin()->first;
}

}  // namespace dslaunch
