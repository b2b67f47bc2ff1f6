// A real ncclGetUniqueId (it needs no GPU: the id holds rank 0's bootstrap address) crossing the
// store to another rank intact. Built with DSLAUNCH_WITH_NCCL.
#include <nccl.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <future>

#include "runtime/comm/nccl/unique_id_exchange.h"
#include "tests/support/test_endpoint.h"

namespace dslaunch::runtime {
namespace {

TEST_CASE("The id of a real ncclGetUniqueId reaches rank 1 byte for byte") {
  dslaunch::testing::TestEndpoint ep;
  ncclUniqueId made;
  auto make = [&]() -> Result<NcclUniqueIdBytes> {
    if (ncclResult_t rc = ncclGetUniqueId(&made); rc != ncclSuccess) {
      return UnavailableError(std::string("ncclGetUniqueId: ") + ncclGetErrorString(rc));
    }
    NcclUniqueIdBytes bytes;
    std::copy(made.internal, made.internal + NCCL_UNIQUE_ID_BYTES, bytes.begin());
    return bytes;
  };
  auto reader = std::async(std::launch::async, [&] {
    auto client = ep.Client();
    return ExchangeUniqueId(*client, 1, make, {.timeout = std::chrono::seconds(20)});
  });
  auto client = ep.Client();
  auto zero = ExchangeUniqueId(*client, 0, make, {.timeout = std::chrono::seconds(20)});
  REQUIRE_MESSAGE(zero.ok(), zero.status().ToString());
  auto one = reader.get();
  REQUIRE_MESSAGE(one.ok(), one.status().ToString());
  CHECK(std::equal(one->begin(), one->end(), made.internal));
  // An id is not all zero: it carries the bootstrap root's address and a random magic.
  CHECK(std::any_of(one->begin(), one->end(), [](char c) { return c != 0; }));
}

}  // namespace
}  // namespace dslaunch::runtime
