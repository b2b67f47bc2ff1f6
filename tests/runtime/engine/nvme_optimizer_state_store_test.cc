// NvmeOptimizerStateStore on its own, with a real swap file under /var/tmp: what a visit writes
// is what the next one reads, record by record, in every access mode, and the file goes with the
// store.
#include "runtime/engine/nvme_optimizer_state_store.h"
#include "tests/support/subprocess.h"

#include <doctest/doctest.h>


#include <filesystem>
#include <numeric>

namespace dslaunch::runtime {
namespace {

namespace fs = std::filesystem;

// Swap files go to a disk (not tmpfs: O_DIRECT and io_uring on a real file system).
constexpr char kDiskDir[] = "/var/tmp";

NvmeStateOptions Options(const std::string& dir, size_t sub_group_size, int buffer_count) {
  NvmeStateOptions o;
  o.offload.device = swap::OffloadDevice::kNvme;
  o.offload.nvme_path = dir;
  o.offload.buffer_count = buffer_count;
  o.sub_group_size = sub_group_size;
  return o;
}

// Every element's state as it is on disk: tensors[i][j] for element j.
std::vector<std::vector<float>> ReadAll(OptimizerStateStore& store, size_t tensors) {
  std::vector<std::vector<float>> out(tensors, std::vector<float>(store.size()));
  size_t expect_begin = 0;
  REQUIRE(store.ForEachSubGroup(StateAccess::kRead, [&](const StateSubGroup& sub) {
              CHECK(sub.begin == expect_begin);  // ascending, covering the slice once
              expect_begin += sub.size();
              for (size_t i = 0; i < tensors; ++i) {
                std::copy(sub.tensors[i].begin(), sub.tensors[i].end(), out[i].begin() + sub.begin);
              }
              return Status::Ok();
            }).ok());
  CHECK(expect_begin == store.size());
  return out;
}

TEST_CASE("The NVMe store starts from the master weights with zero moments and keeps what each visit writes") {
  dslaunch::testing::TempDir dir(kDiskDir);
  std::vector<float> master(1003);
  std::iota(master.begin(), master.end(), 1.0f);
  for (size_t sub_group : {size_t{100}, size_t{1003}, size_t{5000}}) {
    for (int buffers : {1, 2, 3, 4}) {
      CAPTURE(sub_group);
      CAPTURE(buffers);
      OptimizerParams adam;
      auto store = NvmeOptimizerStateStore::Create(adam, master.size(), InitialValuesIn(master),
                                                   Options(dir.path(), sub_group, buffers));
      REQUIRE_MESSAGE(store.ok(), store.status().ToString());
      REQUIRE((*store)->file() != nullptr);
      const std::string path = (*store)->file()->path();
      CHECK(fs::exists(path));
      auto state = ReadAll(**store, 3);
      CHECK(state[0] == master);
      CHECK(state[1] == std::vector<float>(master.size(), 0.0f));
      CHECK(state[2] == std::vector<float>(master.size(), 0.0f));

      // A read-modify-write visit: each tensor gets its own change, per element.
      REQUIRE((*store)->ForEachSubGroup(StateAccess::kReadWrite, [](const StateSubGroup& sub) {
                        for (size_t j = 0; j < sub.size(); ++j) {
                          sub.master()[j] *= 2.0f;
                          sub.m()[j] = static_cast<float>(sub.begin + j);
                          sub.v()[j] = 0.5f;
                        }
                        return Status::Ok();
                      }).ok());
      state = ReadAll(**store, 3);
      for (size_t j = 0; j < master.size(); ++j) {
        REQUIRE(state[0][j] == master[j] * 2.0f);
        REQUIRE(state[1][j] == static_cast<float>(j));
        REQUIRE(state[2][j] == 0.5f);
      }
      // A read-only visit writes nothing back.
      REQUIRE((*store)->ForEachSubGroup(StateAccess::kRead, [](const StateSubGroup& sub) {
                        for (float& x : sub.master()) x = -1.0f;
                        return Status::Ok();
                      }).ok());
      CHECK(ReadAll(**store, 3)[0][7] == master[7] * 2.0f);
      // A write-only visit replaces everything.
      REQUIRE((*store)->ForEachSubGroup(StateAccess::kWrite, [](const StateSubGroup& sub) {
                        for (const auto& t : sub.tensors) std::fill(t.begin(), t.end(), 3.0f);
                        return Status::Ok();
                      }).ok());
      CHECK(ReadAll(**store, 3)[2] == std::vector<float>(master.size(), 3.0f));
      CHECK((*store)->bytes() == static_cast<size_t>(buffers) * (*store)->file()->record_stride());
      store->reset();
      CHECK_FALSE(fs::exists(path));  // the file goes with the store
    }
  }
}

TEST_CASE("The NVMe store visits an empty slice once, makes no file, and stops at a visitor's error") {
  dslaunch::testing::TempDir dir(kDiskDir);
  OptimizerParams sgd;
  sgd.kind = OptimizerKind::kSgd;
  auto empty = NvmeOptimizerStateStore::Create(sgd, 0, InitialValuesIn({}), Options(dir.path(), 10, 2));
  REQUIRE(empty.ok());
  CHECK((*empty)->file() == nullptr);
  int visits = 0;
  REQUIRE((*empty)->ForEachSubGroup(StateAccess::kReadWrite, [&](const StateSubGroup& sub) {
                   ++visits;
                   CHECK(sub.size() == 0);
                   return Status::Ok();
                 }).ok());
  CHECK(visits == 1);

  std::vector<float> master(50, 1.0f);
  auto store = NvmeOptimizerStateStore::Create(sgd, master.size(), InitialValuesIn(master), Options(dir.path(), 10, 2));
  REQUIRE(store.ok());
  visits = 0;
  Status s = (*store)->ForEachSubGroup(StateAccess::kReadWrite, [&](const StateSubGroup& sub) {
    ++visits;
    return sub.begin == 20 ? InternalError("stop here") : Status::Ok();
  });
  CHECK(s.code() == StatusCode::kInternal);
  CHECK(s.message().find("stop here") != std::string::npos);
  CHECK(visits == 3);
}

TEST_CASE("The NVMe store's errors name the file's directory when it cannot be made") {
  OptimizerParams adam;
  std::vector<float> master(10, 1.0f);
  auto store = NvmeOptimizerStateStore::Create(adam, master.size(), InitialValuesIn(master),
                                               Options("/proc/dslaunch-no-such-dir", 10, 2));
  REQUIRE_FALSE(store.ok());
  CHECK_MESSAGE(store.status().message().find("/proc/dslaunch-no-such-dir") != std::string::npos,
                store.status().ToString());
}

}  // namespace
}  // namespace dslaunch::runtime
