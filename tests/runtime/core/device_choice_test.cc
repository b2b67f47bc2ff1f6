#include "runtime/core/device_choice.h"

#include <doctest/doctest.h>

namespace dslaunch::runtime {
namespace {

TEST_CASE("DeviceForLocalRank gives each local rank the device of its index") {
  for (int local = 0; local < 4; ++local) {
    CAPTURE(local);
    auto device = DeviceForLocalRank({local, 4, 4, "0,1,2,3"});
    REQUIRE(device.ok());
    CHECK(*device == local);
  }
  // More devices than workers: the first ones, as torchrun's set_device(local_rank) does.
  auto device = DeviceForLocalRank({1, 2, 8, std::nullopt});
  REQUIRE(device.ok());
  CHECK(*device == 1);
}

TEST_CASE("DeviceForLocalRank refuses more workers than devices, naming the numbers and the variable") {
  auto shared = DeviceForLocalRank({0, 4, 2, "3,5"});
  REQUIRE_FALSE(shared.ok());
  CHECK(shared.status().code() == StatusCode::kFailedPrecondition);
  const std::string message = shared.status().message();
  CHECK(message.find("LOCAL_RANK 0 of LOCAL_WORLD_SIZE 4") != std::string::npos);
  CHECK(message.find("sees 2") != std::string::npos);
  CHECK(message.find("CUDA_VISIBLE_DEVICES='3,5'") != std::string::npos);

  auto none = DeviceForLocalRank({0, 1, 0, std::nullopt});
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message().find("CUDA_VISIBLE_DEVICES unset") != std::string::npos);
}

TEST_CASE("DeviceForLocalRank refuses a local rank outside the node") {
  for (auto [local, world] : {std::pair{-1, 2}, {2, 2}, {0, 0}}) {
    CAPTURE(local);
    CAPTURE(world);
    auto device = DeviceForLocalRank({local, world, 8, std::nullopt});
    REQUIRE_FALSE(device.ok());
    CHECK(device.status().code() == StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace dslaunch::runtime
