// The MASTER_ADDR warning of rank 0's node: its text for each probe result (pure), and the probe
// itself on this machine's own addresses.
#include "agent/workers/master_addr_check.h"

#include <doctest/doctest.h>

namespace dslaunch::agent {
namespace {

TEST_CASE("MASTER_ADDR held by rank 0's node gives no warning") {
  HostAddresses probe{{"10.0.0.5", "127.0.1.1"}, {"127.0.1.1"}};
  CHECK(MasterAddrWarning("w-0", probe, "w-0", {"10.0.0.5"}) == "");
}

TEST_CASE("A MASTER_ADDR elsewhere is named with what it resolves to and the node's own addresses") {
  HostAddresses probe{{"10.0.0.9"}, {}};
  CHECK(MasterAddrWarning("w-3", probe, "w-0", {"10.0.0.5", "fd00::5"}) ==
        "warning: MASTER_ADDR w-3 (10.0.0.9) is not an address of w-0, which runs rank 0 (its addresses: "
        "10.0.0.5, fd00::5): a PyTorch env:// rendezvous listens on rank 0's node and every rank connects to "
        "MASTER_ADDR, so the ranks would wait there until its timeout; pass --master_addr with an address of w-0, "
        "or leave it unset (the first host). If it reaches w-0 through NAT or a Kubernetes ClusterIP Service, "
        "ignore this.");
  // An address literal is not repeated, and a node without other addresses lists none.
  HostAddresses literal{{"203.0.113.77"}, {}};
  const std::string w = MasterAddrWarning("203.0.113.77", literal, "w-0", {});
  CHECK(w.rfind("warning: MASTER_ADDR 203.0.113.77 is not an address of w-0, which runs rank 0: ", 0) == 0);
}

TEST_CASE("A MASTER_ADDR that does not resolve on rank 0's node is said with the resolver's error") {
  Result<HostAddresses> failed = InvalidArgumentError("resolving 'w-9': Name or service not known");
  CHECK(MasterAddrWarning("w-9", failed, "w-0", {"10.0.0.5"}) ==
        "warning: MASTER_ADDR w-9 does not resolve on w-0, which runs rank 0 (resolving 'w-9': Name or service "
        "not known): a PyTorch env:// rendezvous there cannot start; pass --master_addr with an address of w-0, "
        "or leave it unset (the first host).");
}

TEST_CASE("The probe finds loopback held here, a documentation address not held, and a bad name unresolved") {
  auto loopback = ResolveAndProbe("127.0.0.1");
  REQUIRE(loopback.ok());
  CHECK(loopback->resolved == std::vector<std::string>{"127.0.0.1"});
  CHECK(loopback->local == std::vector<std::string>{"127.0.0.1"});
  auto bracketed = ResolveAndProbe("[::1]");
  if (bracketed.ok()) CHECK(bracketed->resolved == std::vector<std::string>{"::1"});  // IPv6 may be off
  auto elsewhere = ResolveAndProbe("203.0.113.77");  // TEST-NET-3: never a machine's address
  REQUIRE(elsewhere.ok());
  CHECK(elsewhere->resolved == std::vector<std::string>{"203.0.113.77"});
  CHECK(elsewhere->local.empty());
  CHECK(ResolveAndProbe("no-such-host.invalid").status().code() == StatusCode::kInvalidArgument);
  for (const auto& a : MachineAddresses()) {
    CHECK(a.rfind("127.", 0) != 0);
    CHECK(a != "::1");
  }
  CHECK(MasterAddrWarning("127.0.0.1", loopback, "here", MachineAddresses()) == "");
}

}  // namespace
}  // namespace dslaunch::agent
