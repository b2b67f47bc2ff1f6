// The NCCL unique id's store record (docs/communicator.md, "NCCL bootstrap through the store"):
// pure encoding, no store, no NCCL.
#include "runtime/comm/nccl/unique_id_exchange.h"

#include <doctest/doctest.h>

namespace dslaunch::runtime {
namespace {

NcclUniqueIdBytes Pattern() {
  NcclUniqueIdBytes id;
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(i * 7 + 3);  // zero bytes included
  return id;
}

TEST_CASE("An NCCL unique id record round-trips every byte, zero bytes included") {
  const NcclUniqueIdBytes id = Pattern();
  const std::string record = EncodeUniqueIdRecord(id);
  CHECK(record.size() == 3 + kNcclUniqueIdBytes);
  auto back = DecodeUniqueIdRecord(record, "gen/0/nccl/ctx0/unique_id");
  REQUIRE(back.ok());
  CHECK(*back == id);
}

TEST_CASE("A failure record carries rank 0's reason to the other ranks") {
  auto back = DecodeUniqueIdRecord(EncodeUniqueIdFailure("ncclGetUniqueId: unhandled system error"), "k");
  REQUIRE_FALSE(back.ok());
  CHECK(back.status().code() == StatusCode::kUnavailable);
  CHECK(back.status().message().find("rank 0 could not make the NCCL unique id: ncclGetUniqueId: unhandled system error") !=
        std::string::npos);
  // A runaway reason is cut, so the record stays small.
  CHECK(EncodeUniqueIdFailure(std::string(100000, 'x')).size() == 6 + kMaxUniqueIdFailureBytes);
}

TEST_CASE("Anything else under the key is data loss naming the key and the length") {
  std::string truncated = EncodeUniqueIdRecord(Pattern());
  truncated.pop_back();
  for (const std::string& bad : {truncated, std::string("ok:"), std::string("hello"), std::string()}) {
    CAPTURE(bad.size());
    auto back = DecodeUniqueIdRecord(bad, "gen/3/nccl/ctx1/unique_id");
    REQUIRE_FALSE(back.ok());
    CHECK(back.status().code() == StatusCode::kDataLoss);
    CHECK(back.status().message().find("'gen/3/nccl/ctx1/unique_id' holds " + std::to_string(bad.size()) + " bytes") !=
          std::string::npos);
  }
}

TEST_CASE("Each communicator of a generation has its own key") {
  CHECK(NcclUniqueIdKey(0) == "nccl/ctx0/unique_id");
  CHECK(NcclUniqueIdKey(12) == "nccl/ctx12/unique_id");
}

}  // namespace
}  // namespace dslaunch::runtime
