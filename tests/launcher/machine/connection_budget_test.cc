#include "launcher/machine/connection_budget.h"

#include <doctest/doctest.h>

namespace dslaunch::launcher {
namespace {

ConnectionDemand Demand(int64_t ranks, int64_t nodes) {
  ConnectionDemand d;
  d.ranks = ranks;
  d.nodes = nodes;
  d.handshake_headroom = 1024;
  return d;
}

TEST_CASE("FitConnections counts every rank and every agent on the direct path, with a margin") {
  // 16,384 ranks on 2,048 nodes: 16,384 + 2,048 = 18,432; margin 1/16.
  auto b = FitConnections(Demand(16384, 2048), 1'000'000);
  REQUIRE(b.ok());
  CHECK(b->planned == 18432);
  CHECK(b->margin == 18432 / 16);
  CHECK(b->descriptors == 18432 + 1152 + kReservedDescriptors);
  // The limit the endpoint gets: the job's own connections plus the whole handshake headroom.
  CHECK(b->max_connections == 18432 + 1152 + 1024);
  CHECK(b->max_connections > 16384);  // the old fixed 8,192 could not hold this job
}

TEST_CASE("FitConnections gives a small job at least the minimum margin") {
  auto b = FitConnections(Demand(8, 1), 1024);
  REQUIRE(b.ok());
  CHECK(b->planned == 8 + 1);
  CHECK(b->margin == kMinConnectionMargin);
}

TEST_CASE("FitConnections counts one connection per node, not the ranks, with the store proxy") {
  ConnectionDemand d = Demand(100000, 12500);
  d.store_proxy = true;
  // The proxies' frames ride the agents' control connections: 12,500 descriptors fit 20,000.
  auto b = FitConnections(d, 20000);
  REQUIRE(b.ok());
  CHECK(b->planned == 12500);
  CHECK(b->margin == 12500 / 16);
  // What the limit leaves goes to fallback workers and the handshake headroom.
  CHECK(b->max_connections == 20000 - kReservedDescriptors);
  // With room for everything: every rank could fall back, and the whole headroom.
  auto roomy = FitConnections(d, 1'000'000);
  REQUIRE(roomy.ok());
  CHECK(roomy->max_connections == 12500 + 12500 / 16 + 100000 + 1024);
}

TEST_CASE("FitConnections shrinks the handshake headroom to what the descriptor limit leaves") {
  auto b = FitConnections(Demand(8, 1), 512);
  REQUIRE(b.ok());
  const int64_t spare = 512 - b->descriptors;
  CHECK(spare < 1024);
  CHECK(b->max_connections == b->planned + b->margin + spare);
}

TEST_CASE("FitConnections counts the descriptors each node's start holds") {
  ConnectionDemand d = Demand(64, 8);
  d.start_descriptors = 8;
  auto with = FitConnections(d, 1'000'000);
  auto without = FitConnections(Demand(64, 8), 1'000'000);
  REQUIRE(with.ok());
  REQUIRE(without.ok());
  CHECK(with->descriptors == without->descriptors + 8);
}

TEST_CASE("FitConnections refuses a job over the descriptor limit with the numbers and the ways out") {
  // 100k ranks against this machine's hard limit of 20,000.
  auto b = FitConnections(Demand(100000, 12500), 20000);
  REQUIRE_FALSE(b.ok());
  CHECK(b.status().code() == StatusCode::kFailedPrecondition);
  const std::string m = b.status().message();
  CAPTURE(m);
  CHECK(m.find("100000 ranks on 12500 nodes") != std::string::npos);
  CHECK(m.find("descriptor limit is 20000") != std::string::npos);
  const int64_t needed = 100000 + 12500 + (112500 / 16) + kReservedDescriptors;
  CHECK(m.find("at least " + std::to_string(needed)) != std::string::npos);
  CHECK(m.find("ulimit -n") != std::string::npos);
  CHECK(m.find("LimitNOFILE=") != std::string::npos);
  CHECK(m.find("store proxy") != std::string::npos);
  // With the proxy already on, the message does not suggest it.
  ConnectionDemand proxied = Demand(100000, 12500);
  proxied.store_proxy = true;
  auto p = FitConnections(proxied, 12000);
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().message().find("proxied by the agents") != std::string::npos);
  CHECK(p.status().message().find("store proxy,") == std::string::npos);
}

TEST_CASE("FitConnections accepts a job that needs exactly the limit") {
  auto fits = FitConnections(Demand(1000, 125), 1'000'000);
  REQUIRE(fits.ok());
  CHECK(FitConnections(Demand(1000, 125), static_cast<uint64_t>(fits->descriptors)).ok());
  CHECK_FALSE(FitConnections(Demand(1000, 125), static_cast<uint64_t>(fits->descriptors) - 1).ok());
}

}  // namespace
}  // namespace dslaunch::launcher
