#include "common/store/kv_store.h"

#include <doctest/doctest.h>

#include <limits>

namespace dslaunch {
namespace {

using std::chrono::milliseconds;
using Ids = std::vector<KvStore::WaiterId>;
const KvStore::TimePoint kT0{};  // injected time: tests never read a clock

TEST_CASE("KvStore Set replaces and Get returns the latest value") {
  KvStore s;
  CHECK(s.Get("k") == nullptr);
  REQUIRE(s.Set("k", "v1").ok());
  REQUIRE(s.Set("k", "v2").ok());
  REQUIRE(s.Get("k") != nullptr);
  CHECK(*s.Get("k") == "v2");
  CHECK(s.bytes() == 3);
  CHECK(s.Set(std::string(kMaxStoreKeyBytes + 1, 'k'), "v").code() == StatusCode::kInvalidArgument);
}

TEST_CASE("KvStore Add keeps a decimal counter and refuses non-counters") {
  KvStore s;
  CHECK(*s.Add("c", 5) == 5);
  CHECK(*s.Add("c", -7) == -2);
  CHECK(*s.Get("c") == "-2");
  REQUIRE(s.Set("text", "abc").ok());
  CHECK(s.Add("text", 1).status().code() == StatusCode::kFailedPrecondition);
  REQUIRE(s.Set("big", std::to_string(std::numeric_limits<int64_t>::max())).ok());
  CHECK(s.Add("big", 1).status().code() == StatusCode::kFailedPrecondition);
  CHECK(*s.Get("big") == std::to_string(std::numeric_limits<int64_t>::max()));
}

TEST_CASE("KvStore CompareSet follows TCPStore semantics") {
  KvStore s;
  SUBCASE("missing key with empty expected creates it") {
    CHECK(*s.CompareSet("k", "", "new") == "new");
    CHECK(*s.Get("k") == "new");
  }
  SUBCASE("missing key with non-empty expected returns expected and creates nothing") {
    CHECK(*s.CompareSet("k", "old", "new") == "old");
    CHECK(s.Get("k") == nullptr);
  }
  SUBCASE("matching value is swapped") {
    REQUIRE(s.Set("k", "old").ok());
    CHECK(*s.CompareSet("k", "old", "new") == "new");
    CHECK(*s.Get("k") == "new");
  }
  SUBCASE("mismatching value is returned unchanged") {
    REQUIRE(s.Set("k", "other").ok());
    CHECK(*s.CompareSet("k", "old", "new") == "other");
    CHECK(*s.Get("k") == "other");
  }
}

TEST_CASE("KvStore Check, Delete, NumKeys and DeletePrefix") {
  KvStore s;
  REQUIRE(s.Set("gen/0/a", "1").ok());
  REQUIRE(s.Set("gen/0/b", "1").ok());
  REQUIRE(s.Set("gen/1/a", "1").ok());
  CHECK(s.Check({"gen/0/a", "gen/0/b"}));
  CHECK_FALSE(s.Check({"gen/0/a", "gen/0/c"}));
  CHECK(s.Check({}));
  CHECK(s.NumKeys("") == 3);
  CHECK(s.NumKeys("gen/0/") == 2);
  CHECK(s.NumKeys("gen/2/") == 0);
  CHECK(s.Delete("gen/0/b"));
  CHECK_FALSE(s.Delete("gen/0/b"));
  CHECK(s.NumKeys("gen/0/") == 1);
  CHECK(s.DeletePrefix("gen/0/") == 1);
  CHECK(s.NumKeys("") == 1);
  CHECK(s.bytes() == std::string("gen/1/a1").size());
}

TEST_CASE("KvStore DeletePrefixIf removes only the chosen keys under the prefix") {
  KvStore s;
  for (const char* k : {"gen/1/a", "gen/1/b", "gen/2/a", "other"}) REQUIRE(s.Set(k, "v").ok());
  std::vector<std::string> asked;
  CHECK(s.DeletePrefixIf("gen/", [&](std::string_view key) {
    asked.emplace_back(key);
    return key.substr(key.size() - 2) == "/a";
  }) == 2);
  CHECK(asked == std::vector<std::string>{"gen/1/a", "gen/1/b", "gen/2/a"});
  CHECK(s.NumKeys("") == 2);
  CHECK(s.Get("gen/1/b") != nullptr);
  CHECK(s.Get("other") != nullptr);
  CHECK(s.bytes() == std::string("gen/1/bvotherv").size());
}

TEST_CASE("KvStore Watch returns true at once when the keys exist") {
  KvStore s;
  REQUIRE(s.Set("a", "1").ok());
  CHECK(s.Watch(1, {"a"}, kT0 + milliseconds(10)));
  CHECK(s.num_waiters() == 0);
  CHECK(s.Watch(2, {}, kT0));
}

TEST_CASE("KvStore waiter becomes ready only when every key exists") {
  KvStore s;
  CHECK_FALSE(s.Watch(7, {"a", "b", "a"}, kT0 + milliseconds(100)));
  REQUIRE(s.Set("a", "1").ok());
  CHECK(s.TakeReady().empty());
  REQUIRE(s.Set("a", "2").ok());  // replacing an existing key creates nothing new
  CHECK(s.TakeReady().empty());
  REQUIRE(s.Add("b", 1).ok());
  CHECK(s.TakeReady() == Ids{7});
  CHECK(s.TakeReady().empty());
  CHECK(s.num_waiters() == 0);
  CHECK_FALSE(s.NextDeadline().has_value());
}

TEST_CASE("KvStore wakes every waiter of a key, in registration order") {
  KvStore s;
  CHECK_FALSE(s.Watch(1, {"k"}, kT0 + milliseconds(100)));
  CHECK_FALSE(s.Watch(2, {"k"}, kT0 + milliseconds(50)));
  CHECK_FALSE(s.Watch(3, {"other"}, kT0 + milliseconds(50)));
  REQUIRE(s.CompareSet("k", "", "v").ok());
  CHECK(s.TakeReady() == Ids{1, 2});
  CHECK(s.num_waiters() == 1);
}

TEST_CASE("KvStore expires waiters at their deadline, earliest first, with injected time") {
  KvStore s;
  CHECK_FALSE(s.Watch(1, {"x"}, kT0 + milliseconds(300)));
  CHECK_FALSE(s.Watch(2, {"y"}, kT0 + milliseconds(100)));
  CHECK_FALSE(s.Watch(3, {"z"}, kT0 + milliseconds(200)));
  CHECK(*s.NextDeadline() == kT0 + milliseconds(100));
  CHECK(s.TakeExpired(kT0 + milliseconds(99)).empty());
  CHECK(s.TakeExpired(kT0 + milliseconds(200)) == Ids{2, 3});
  CHECK(*s.NextDeadline() == kT0 + milliseconds(300));
  REQUIRE(s.Set("y", "late").ok());  // an expired waiter is gone: nothing to wake
  CHECK(s.TakeReady().empty());
  CHECK(s.TakeExpired(kT0 + milliseconds(1000)) == Ids{1});
  CHECK_FALSE(s.NextDeadline().has_value());
}

TEST_CASE("KvStore does not expire a waiter that became ready before its deadline") {
  KvStore s;
  CHECK_FALSE(s.Watch(1, {"k"}, kT0 + milliseconds(10)));
  REQUIRE(s.Set("k", "v").ok());
  CHECK(s.TakeExpired(kT0 + milliseconds(20)).empty());
  CHECK(s.TakeReady() == Ids{1});
}

TEST_CASE("KvStore Cancel forgets a waiter") {
  KvStore s;
  CHECK_FALSE(s.Watch(1, {"k"}, kT0 + milliseconds(10)));
  s.Cancel(1);
  s.Cancel(99);  // unknown: ignored
  REQUIRE(s.Set("k", "v").ok());
  CHECK(s.TakeReady().empty());
  CHECK(s.TakeExpired(kT0 + milliseconds(20)).empty());
  CHECK(s.num_waiters() == 0);
}

TEST_CASE("KvStore waiter waits again for a key deleted before it was collected") {
  KvStore s;
  CHECK_FALSE(s.Watch(1, {"a", "b"}, kT0 + milliseconds(100)));
  REQUIRE(s.Set("a", "1").ok());
  REQUIRE(s.Set("b", "1").ok());
  CHECK(s.Delete("a"));
  CHECK(s.TakeReady().empty());
  CHECK(s.num_waiters() == 1);
  REQUIRE(s.Set("a", "again").ok());
  CHECK(s.TakeReady() == Ids{1});
}

TEST_CASE("KvStore waiter on a key that existed at Watch time counts its later deletion") {
  KvStore s;
  REQUIRE(s.Set("a", "1").ok());
  CHECK_FALSE(s.Watch(1, {"a", "b"}, kT0 + milliseconds(100)));
  CHECK(s.Delete("a"));
  REQUIRE(s.Set("b", "1").ok());
  CHECK(s.TakeReady().empty());
  REQUIRE(s.Set("a", "1").ok());
  CHECK(s.TakeReady() == Ids{1});
}

TEST_CASE("KvStore wakes, expires and cancels N waiters of one key in work linear in N") {
  // A barrier's release: every rank waits on one key, the last arrival sets it. Removing a woken
  // waiter once scanned the key's whole list (N^2/2 steps at N waiters); now each is unlinked in
  // one step. Work is counted (watcher_steps), not timed.
  for (int n : {1000, 16000}) {
    CAPTURE(n);
    KvStore s;
    for (int i = 0; i < n; ++i) {
      CHECK_FALSE(s.Watch(static_cast<KvStore::WaiterId>(i), {"go"}, kT0 + milliseconds(100)));
    }
    const uint64_t before = s.watcher_steps();
    REQUIRE(s.Set("go", "1").ok());
    const Ids woken = s.TakeReady();
    REQUIRE(woken.size() == static_cast<size_t>(n));
    CHECK(woken.front() == 0);  // in the order they registered
    CHECK(woken.back() == static_cast<KvStore::WaiterId>(n - 1));
    CHECK(s.watcher_steps() - before == 2 * static_cast<uint64_t>(n));  // one visit, one unlink each
    CHECK(s.num_waiters() == 0);

    // The same for deadlines and cancellations, on a key that never comes, with two keys each.
    KvStore t;
    for (int i = 0; i < n; ++i) {
      CHECK_FALSE(t.Watch(static_cast<KvStore::WaiterId>(i), {"never", "also"}, kT0 + milliseconds(i % 2 ? 10 : 50)));
    }
    for (int i = 0; i < n; i += 4) t.Cancel(static_cast<KvStore::WaiterId>(i));
    CHECK(t.TakeExpired(kT0 + milliseconds(60)).size() == static_cast<size_t>(n - (n + 3) / 4));
    CHECK(t.watcher_steps() == 2 * static_cast<uint64_t>(n));  // two keys unlinked per waiter
    CHECK(t.num_waiters() == 0);
  }
}

}  // namespace
}  // namespace dslaunch
