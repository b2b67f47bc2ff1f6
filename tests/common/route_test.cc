#include "common/route.h"

#include <doctest/doctest.h>

namespace dslaunch {
namespace {

TEST_CASE("The route to a loopback peer leaves from 127.0.0.1, on the interface lo") {
  auto ip = SourceAddressToward("127.0.0.1:29500");
  REQUIRE(ip.ok());
  CHECK(*ip == "127.0.0.1");
  auto name = InterfaceWithAddress(*ip);
  REQUIRE(name.ok());
  CHECK(*name == "lo");
  CHECK(InterfaceWithAddress("203.0.113.77").status().code() == StatusCode::kNotFound);
  CHECK(*InterfaceToward("127.0.0.1", "29500") == "lo");
  CHECK(SourceAddressToward("no-port").status().code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dslaunch
