#include "launcher/status/connection_pool.h"

#include <doctest/doctest.h>

namespace dslaunch::launcher {
namespace {

using Kind = PoolAdmission::Kind;

TEST_CASE("ConnectionPool admits up to its bounds, then a newcomer takes the place of the longest idle") {
  ConnectionPool pool({3, 2});
  const PoolAdmission a1 = pool.Admit("a");
  const PoolAdmission a2 = pool.Admit("a");
  REQUIRE(a1.kind == Kind::kAdmitted);
  REQUIRE(a2.kind == Kind::kAdmitted);
  CHECK(!a1.evicted);
  CHECK(pool.from("a") == 2);
  // "a" at its own bound: its oldest idle connection gives way, not another client's.
  const PoolAdmission b1 = pool.Admit("b");
  const PoolAdmission a3 = pool.Admit("a");
  REQUIRE(a3.kind == Kind::kAdmitted);
  CHECK(a3.evicted == a1.id);
  CHECK(pool.from("a") == 2);
  CHECK(pool.total() == 3);
  // The pool full, "c" under its bound: the longest idle of anyone gives way. b1 began to wait
  // before a2 was answered and waited again.
  pool.SetIdle(a2.id, false);
  pool.SetIdle(a2.id, true);
  const PoolAdmission c1 = pool.Admit("c");
  REQUIRE(c1.kind == Kind::kAdmitted);
  CHECK(c1.evicted == b1.id);
  CHECK(pool.from("b") == 0);
  // Releasing an evicted id changes nothing; releasing a live one frees its place.
  pool.Release(b1.id);
  CHECK(pool.total() == 3);
  pool.Release(c1.id);
  CHECK(pool.total() == 2);
  CHECK(pool.from("c") == 0);
}

TEST_CASE("ConnectionPool never evicts a connection being answered: it refuses when none is idle") {
  ConnectionPool pool({2, 1});
  const PoolAdmission a = pool.Admit("a");
  pool.SetIdle(a.id, false);
  const PoolAdmission again = pool.Admit("a");
  CHECK(again.kind == Kind::kClientFull);
  CHECK(pool.from("a") == 1);
  const PoolAdmission b = pool.Admit("b");
  pool.SetIdle(b.id, false);
  const PoolAdmission c = pool.Admit("c");
  CHECK(c.kind == Kind::kPoolFull);
  CHECK(pool.total() == 2);
  CHECK(DescribeRefusal(Kind::kClientFull, pool.limits(), "a", "connections") ==
        "1 connections from a are open and busy already (the status server's limit per client)");
  CHECK(DescribeRefusal(Kind::kPoolFull, pool.limits(), "c", "event streams") ==
        "2 event streams are open and busy already (the status server's limit)");
  pool.SetIdle(b.id, true);  // answered, waiting again: now it may give way
  const PoolAdmission c2 = pool.Admit("c");
  REQUIRE(c2.kind == Kind::kAdmitted);
  CHECK(c2.evicted == b.id);
}

}  // namespace
}  // namespace dslaunch::launcher
