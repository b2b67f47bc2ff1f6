#include "common/endpoint/handshake_admission.h"

#include <doctest/doctest.h>

namespace dslaunch {
namespace {

TEST_CASE("HandshakeAdmission refuses an address at its own bound and admits other addresses") {
  HandshakeAdmission a(HandshakeLimits{.total = 10, .per_address = 3});
  for (int i = 0; i < 3; ++i) CHECK(a.Admit("10.0.0.7") == Admission::kAdmitted);
  CHECK(a.Admit("10.0.0.7") == Admission::kAddressFull);
  CHECK(a.Admit("10.0.0.7") == Admission::kAddressFull);
  CHECK(a.from("10.0.0.7") == 3);
  CHECK(a.Admit("10.0.0.8") == Admission::kAdmitted);
  CHECK(a.total() == 4);
  // One of the three authenticates (or closes): the address may open one more.
  a.Release("10.0.0.7");
  CHECK(a.from("10.0.0.7") == 2);
  CHECK(a.Admit("10.0.0.7") == Admission::kAdmitted);
  CHECK(a.Admit("10.0.0.7") == Admission::kAddressFull);
}

TEST_CASE("HandshakeAdmission refuses every address once the total bound is reached") {
  HandshakeAdmission a(HandshakeLimits{.total = 4, .per_address = 3});
  CHECK(a.Admit("a") == Admission::kAdmitted);
  CHECK(a.Admit("a") == Admission::kAdmitted);
  CHECK(a.Admit("b") == Admission::kAdmitted);
  CHECK(a.Admit("c") == Admission::kAdmitted);
  CHECK(a.Admit("d") == Admission::kTotalFull);
  CHECK(a.Admit("a") == Admission::kTotalFull);
  CHECK(a.total() == 4);
  CHECK(a.from("d") == 0);
  a.Release("b");
  CHECK(a.Admit("d") == Admission::kAdmitted);
  CHECK(a.total() == 4);
}

TEST_CASE("HandshakeAdmission names the per-address bound first, and forgets released addresses") {
  HandshakeAdmission a(HandshakeLimits{.total = 2, .per_address = 2});
  CHECK(a.Admit("a") == Admission::kAdmitted);
  CHECK(a.Admit("a") == Admission::kAdmitted);
  // Both bounds are reached; the address is told about its own.
  CHECK(a.Admit("a") == Admission::kAddressFull);
  CHECK(a.Admit("b") == Admission::kTotalFull);
  a.Release("a");
  a.Release("a");
  CHECK(a.total() == 0);
  CHECK(a.from("a") == 0);
}

TEST_CASE("The default bounds let one address take at most a sixteenth of the handshake slots") {
  HandshakeLimits d;
  CHECK(d.total == kMaxUnauthenticatedConnections);
  CHECK(d.per_address == kMaxUnauthenticatedPerAddress);
  CHECK(d.total == 16 * d.per_address);
}

TEST_CASE("DescribeRefusal names the bound that refused") {
  HandshakeLimits l{.total = 1024, .per_address = 64};
  CHECK(DescribeRefusal(Admission::kAddressFull, l) ==
        "64 connections from this address are in their handshake already");
  CHECK(DescribeRefusal(Admission::kTotalFull, l) ==
        "1024 connections are in their handshake already");
}

}  // namespace
}  // namespace dslaunch
