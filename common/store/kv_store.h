// KvStore: the data and the waiters of the rendezvous store, with no I/O and no clock.
//
// The semantics follow PyTorch's TCPStore: values are byte strings; ADD keeps a counter as its
// decimal text (so GET of a counter returns e.g. "3"); COMPARE_SET returns the value after the
// attempt; WAIT blocks until every key exists. Blocking is expressed with waiters: the caller
// registers a waiter (an id, keys, a deadline), and after each mutation collects the waiters that
// became ready (TakeReady), and from time to time the ones past their deadline (TakeExpired).
// Time is an input: deadlines and `now` come from the caller.
//
// Keys are opaque here. Namespacing by generation ("gen/<g>/" prefix) is StoreClient's and
// StoreService's business (docs/protocol.md). Not thread-safe: StoreService uses it from the
// io_context thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"

namespace dslaunch {

// Keys are names, not data: a longer key is a bug in the caller.
inline constexpr size_t kMaxStoreKeyBytes = 4096;
// Total bytes of keys plus values the store holds. Rendezvous data is kilobytes per rank (Gloo
// addresses, NCCL ids); the bound keeps a runaway client from exhausting the launcher's memory.
inline constexpr size_t kMaxStoreBytes = 512u << 20;

class KvStore {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using WaiterId = uint64_t;

  // Creates or replaces `key`. kInvalidArgument for a key over kMaxStoreKeyBytes,
  // kFailedPrecondition if the store would exceed kMaxStoreBytes.
  Status Set(std::string_view key, std::string value);

  // The value, or nullptr if the key does not exist. Valid until the next mutation.
  const std::string* Get(std::string_view key) const;

  // Adds `delta` to the counter at `key` (created as 0 if absent) and returns the new value.
  // kFailedPrecondition if the existing value is not a decimal int64 or the sum overflows.
  Result<int64_t> Add(std::string_view key, int64_t delta);

  // TCPStore semantics: if the key exists and equals `expected`, it becomes `desired`; if the key
  // does not exist and `expected` is empty, it is created as `desired`. Returns the value after
  // the attempt, except that for a missing key with non-empty `expected` it returns `expected`
  // (as TCPStore does); compare the result with `desired` to learn whether the swap happened.
  Result<std::string> CompareSet(std::string_view key, std::string_view expected,
                                 std::string desired);

  // True when every key exists (true for an empty list).
  bool Check(const std::vector<std::string>& keys) const;

  // Removes `key`; returns whether it existed. Waiters that had seen it wait for it again.
  bool Delete(std::string_view key);

  // Keys starting with `prefix` ("" counts all), and their removal (returns how many went).
  int64_t NumKeys(std::string_view prefix) const;
  size_t DeletePrefix(std::string_view prefix);
  // Removes the keys starting with `prefix` for which `doomed(key)` is true; returns how many.
  size_t DeletePrefixIf(std::string_view prefix,
                        const std::function<bool(std::string_view key)>& doomed);

  // Bytes of keys plus values held.
  size_t bytes() const { return bytes_; }

  // Registers waiter `id` (unique among live waiters; checked) for `keys` until `deadline`.
  // Returns true, registering nothing, if every key already exists. Otherwise the waiter is
  // returned once, by TakeReady when all its keys exist or by TakeExpired after the deadline.
  bool Watch(WaiterId id, std::vector<std::string> keys, TimePoint deadline);

  // Forgets a waiter (its connection closed). Unknown ids are ignored.
  void Cancel(WaiterId id);

  // Waiters whose keys all exist now, in the order they became ready; each is removed.
  std::vector<WaiterId> TakeReady();

  // Waiters whose deadline is <= now and that are not ready, earliest deadline first; removed.
  std::vector<WaiterId> TakeExpired(TimePoint now);

  // The earliest deadline of a live waiter, if any: when to call TakeExpired next.
  std::optional<TimePoint> NextDeadline() const;

  size_t num_waiters() const { return waiters_.size(); }
  // Entries of the keys' watcher lists visited or unlinked so far: the work of waking, re-arming
  // and removing waiters, which is linear in the waiters involved (each is unlinked from each of
  // its keys in O(1)); tests count it instead of timing it.
  uint64_t watcher_steps() const { return watcher_steps_; }

 private:
  using WatcherList = std::list<WaiterId>;  // a key's waiters, in the order they registered
  struct Waiter {
    std::vector<std::string> keys;
    std::vector<WatcherList::iterator> positions;  // in each key's WatcherList, keys' order
    size_t missing = 0;
    TimePoint deadline;
  };

  void OnKeyCreated(const std::string& key);
  void OnKeyRemoved(const std::string& key);
  void RemoveWaiter(WaiterId id);
  void Erase(std::map<std::string, std::string, std::less<>>::iterator it);

  std::map<std::string, std::string, std::less<>> data_;
  size_t bytes_ = 0;
  std::unordered_map<WaiterId, Waiter> waiters_;
  std::unordered_map<std::string, WatcherList> watchers_by_key_;
  uint64_t watcher_steps_ = 0;
  std::set<std::pair<TimePoint, WaiterId>> deadlines_;
  std::vector<WaiterId> ready_;  // may hold stale ids; TakeReady filters them
};

}  // namespace dslaunch
