// SwapStream over a fake engine (ordering, errors) and over real files with both engines
// (write, stream-update, read back, compare exactly).
#include "runtime/swap/swap_stream.h"

#include <doctest/doctest.h>

#include <filesystem>

#include "tests/fakes/fake_io_engine.h"
#include "tests/runtime/swap/swap_test_files.h"
#include "tests/support/subprocess.h"
#include "tests/support/skip.h"

namespace dslaunch::runtime::swap {
namespace {

using testing::FakeIoEngine;
using testing::FillPattern;
using testing::FirstMismatch;
using testing::PatternByte;
using testing::TempDir;

constexpr RingMode kReadModifyWrite{true, true};
constexpr RingMode kReadOnly{true, false};
constexpr RingMode kWriteOnly{false, true};

// Uneven sub-groups, as the last of a partition is: record_bytes is the largest.
std::vector<uint64_t> GroupBytes(size_t groups, uint64_t record_bytes) {
  std::vector<uint64_t> bytes(groups, record_bytes);
  if (groups > 1) bytes.back() = record_bytes / 3 + 7;
  return bytes;
}

// Fills every sub-group with its pattern, adds 1 to every byte in a read-modify-write pass, and
// checks in a read-only pass that every byte is its pattern plus 1.
void FillUpdateVerify(SwapStream& stream, std::span<const uint64_t> bytes) {
  REQUIRE(stream.Run(kWriteOnly, bytes, [](size_t g, std::span<std::byte> b) {
    FillPattern(b, g);
    return Status::Ok();
  }).ok());
  std::vector<size_t> order;
  Status s = stream.Run(kReadModifyWrite, bytes, [&](size_t g, std::span<std::byte> b) {
    order.push_back(g);
    if (FirstMismatch(b, g) != -1) return DataLossError("sub-group " + std::to_string(g) + " read back wrong");
    for (auto& x : b) x = static_cast<std::byte>(static_cast<uint8_t>(x) + 1);
    return Status::Ok();
  });
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CHECK(order.size() == bytes.size());
  size_t checked = 0;
  s = stream.Run(kReadOnly, bytes, [&](size_t g, std::span<std::byte> b) {
    for (size_t i = 0; i < b.size(); ++i) {
      if (b[i] != static_cast<std::byte>(static_cast<uint8_t>(PatternByte(g, i)) + 1)) {
        return DataLossError("sub-group " + std::to_string(g) + " byte " + std::to_string(i) + " not updated");
      }
    }
    ++checked;
    return Status::Ok();
  });
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  CHECK(checked == bytes.size());
}

TEST_CASE("The ring streams, updates and reads back every sub-group through a fake engine") {
  TempDir dir("/var/tmp");
  auto file = SwapFile::Create({dir.path(), SwapKind::kOptimizer, 0, 10000, 7});
  REQUIRE(file.ok());
  for (int buffers = 1; buffers <= 5; ++buffers) {
    CAPTURE(buffers);
    // The fake copies at Wait: a buffer reused before its transfer was waited for shows as data.
    FakeIoEngine engine(file->file_bytes());
    auto stream = SwapStream::Create(&*file, &engine, buffers);
    REQUIRE(stream.ok());
    FillUpdateVerify(*stream, GroupBytes(7, 10000));
    CHECK(engine.in_flight() == 0);
    CHECK(engine.stats().max_in_flight <= static_cast<uint64_t>(buffers));
  }
}

TEST_CASE("A failed transfer stops the ring with the sub-group named and nothing left in flight") {
  TempDir dir("/var/tmp");
  auto file = SwapFile::Create({dir.path(), SwapKind::kOptimizer, 0, 4096, 6});
  REQUIRE(file.ok());
  for (int failing = 1; failing <= 12; ++failing) {
    CAPTURE(failing);
    FakeIoEngine engine(file->file_bytes());
    engine.FailTransfer(failing);
    auto stream = SwapStream::Create(&*file, &engine, 3);
    Status s = stream->Run(kReadModifyWrite, GroupBytes(6, 4096), [](size_t, std::span<std::byte>) { return Status::Ok(); });
    CHECK(s.code() == StatusCode::kInternal);
    CHECK(s.message().find("swap file '" + file->path() + "': sub-group ") == 0);
    CHECK(s.message().find("transfer " + std::to_string(failing) + " fails") != std::string::npos);
    CHECK(engine.in_flight() == 0);
  }
  FakeIoEngine engine(file->file_bytes());
  auto stream = SwapStream::Create(&*file, &engine, 3);
  Status s = stream->Run(kReadModifyWrite, GroupBytes(6, 4096), [](size_t g, std::span<std::byte>) {
    return g == 2 ? InvalidArgumentError("update refused") : Status::Ok();
  });
  CHECK(s.message() == "swap file '" + file->path() + "': sub-group 2: update refused");
  CHECK(engine.in_flight() == 0);
}

TEST_CASE("The ring streams real swap files on disk and on tmpfs through both engines") {
  DSLAUNCH_SKIP_UNLESS(testing::UringAvailable(), "io_uring", "io_uring_queue_init fails here");
  for (const char* parent : {"/var/tmp", "/dev/shm"}) {
    for (IoBackend backend : {IoBackend::kUring, IoBackend::kSync}) {
      for (int buffers : {1, 2, 4}) {
        CAPTURE(parent);
        CAPTURE(backend == IoBackend::kUring);
        CAPTURE(buffers);
        TempDir dir(parent);
        constexpr uint64_t kRecordBytes = 200 * 1000;  // not a multiple of any block size
        auto file = SwapFile::Create({dir.path(), SwapKind::kOptimizer, 0, kRecordBytes, 9});
        REQUIRE(file.ok());
        AioConfig config;
        config.block_size = 32 * 1024;
        config.queue_depth = 8;
        IoEngineChoice choice = MakeIoEngine(backend, config);
        REQUIRE(!choice.warning.has_value());
        auto stream = SwapStream::Create(&*file, choice.engine.get(), buffers);
        REQUIRE(stream.ok());
        FillUpdateVerify(*stream, GroupBytes(9, kRecordBytes));
      }
    }
  }
}

}  // namespace
}  // namespace dslaunch::runtime::swap
