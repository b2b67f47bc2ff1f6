// The I/O engines and swap files on real files: the disk (/var/tmp) with O_DIRECT, tmpfs
// (/dev/shm), and a file system that refuses O_DIRECT (an injected open).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>
#include <filesystem>

#include "runtime/swap/aligned_buffer.h"
#include "runtime/swap/io_engine.h"
#include "runtime/swap/swap_directory.h"
#include "runtime/swap/swap_file.h"
#include "runtime/swap/sync_io_engine.h"
#include "runtime/swap/uring_io_engine.h"
#include "tests/runtime/swap/swap_test_files.h"
#include "tests/support/subprocess.h"
#include "tests/support/skip.h"

namespace dslaunch::runtime::swap {
namespace {

using testing::FillPattern;
using testing::FirstMismatch;
using testing::TempDir;
using testing::UringAvailable;

// A file system that refuses O_DIRECT, as tmpfs did before Linux 6.6.
int OpenRefusingDirect(const char* path, int flags, mode_t mode) {
  if (flags & O_DIRECT) {
    errno = EINVAL;
    return -1;
  }
  return ::open(path, flags, mode);
}

std::unique_ptr<IoEngine> Engine(IoBackend backend, const AioConfig& config) {
  IoEngineChoice choice = MakeIoEngine(backend, config);
  // Cases that use io_uring skip first where it is unavailable; a warning here is a failure.
  REQUIRE_MESSAGE(!choice.warning.has_value(), *choice.warning);
  return std::move(choice.engine);
}

TEST_CASE("Where io_uring cannot be set up the factory falls back to pread/pwrite and says why") {
  AioConfig config;
  config.queue_depth = 1 << 20;  // beyond io_uring's 32768 entries: io_uring_queue_init refuses
  IoEngineChoice choice = MakeIoEngine(IoBackend::kUring, config);
  REQUIRE(choice.warning.has_value());
  CHECK(choice.warning->find("io_uring is not available (io_uring_queue_init(1048576): ") == 0);
  CHECK(choice.warning->find("synchronous pread/pwrite") != std::string::npos);
  CHECK(choice.engine->name() == "pread/pwrite");
  CHECK_FALSE(MakeIoEngine(IoBackend::kSync, AioConfig{}).warning.has_value());
}

// Writes `records` records of distinct patterns through `engine`, all in flight at once, then
// reads them back into fresh buffers and compares every byte.
void WriteAndReadBack(const SwapFile& file, IoEngine& engine, uint64_t records) {
  std::vector<AlignedBuffer> out, in;
  std::vector<IoTicket> tickets;
  for (uint64_t r = 0; r < records; ++r) {
    out.push_back(*AlignedBuffer::Allocate(file.record_stride(), 4096));
    FillPattern(out.back().bytes(), r);
    tickets.push_back(*engine.Start({IoOp::kWrite, file.fd(), file.RecordOffset(r), out.back().bytes()}));
  }
  for (IoTicket t : tickets) REQUIRE(engine.Wait(t).ok());
  tickets.clear();
  for (uint64_t r = records; r-- > 0;) {  // backwards, to catch offset mix-ups
    in.push_back(*AlignedBuffer::Allocate(file.record_stride(), 4096));
    tickets.push_back(*engine.Start({IoOp::kRead, file.fd(), file.RecordOffset(r), in.back().bytes()}));
  }
  for (IoTicket t : tickets) REQUIRE(engine.Wait(t).ok());
  for (uint64_t i = 0; i < records; ++i) {
    CAPTURE(i);
    CHECK(FirstMismatch(in[i].bytes(), records - 1 - i) == -1);
  }
}

TEST_CASE("Combined adds two engines' counts and keeps the larger max_in_flight") {
  const IoStats sum = Combined(IoStats{1, 2, 3, 4, 5}, IoStats{10, 20, 30, 40, 2});
  CHECK(sum.bytes_read == 11);
  CHECK(sum.bytes_written == 22);
  CHECK(sum.pieces == 33);
  CHECK(sum.submit_calls == 44);
  CHECK(sum.max_in_flight == 5);
  CHECK(Combined(IoStats{}, IoStats{0, 0, 0, 0, 7}).max_in_flight == 7);
}

TEST_CASE("Both engines write and read back records exactly on disk, on tmpfs and without O_DIRECT") {
  DSLAUNCH_SKIP_UNLESS(UringAvailable(), "io_uring", "io_uring_queue_init fails here");
  struct Place {
    const char* parent;
    OpenFileFn open_file;
  };
  for (Place place : {Place{"/var/tmp", nullptr}, Place{"/dev/shm", nullptr}, Place{"/var/tmp", &OpenRefusingDirect}}) {
    for (IoBackend backend : {IoBackend::kUring, IoBackend::kSync}) {
      CAPTURE(place.parent);
      CAPTURE(place.open_file != nullptr);
      CAPTURE(backend == IoBackend::kUring);
      TempDir dir(place.parent);
      // 300 KiB records in 64 KiB blocks: pieces end short of a block, records not a power of two.
      auto file = SwapFile::Create({dir.path(), SwapKind::kOptimizer, 1, 300 * 1024, 6, place.open_file});
      REQUIRE_MESSAGE(file.ok(), file.status().ToString());
      CHECK(file->record_stride() % file->alignment() == 0);
      CHECK(std::filesystem::file_size(file->path()) == file->file_bytes());
      if (place.open_file != nullptr) {
        CHECK_FALSE(file->direct());
        REQUIRE(file->warning().has_value());
        CHECK(file->warning()->find("refused O_DIRECT") != std::string::npos);
        CHECK(file->warning()->find(file->path()) != std::string::npos);
      } else if (!file->direct()) {
        CHECK(file->warning().has_value());  // never silent
      }
      if (std::string(place.parent) == "/var/tmp" && place.open_file == nullptr) CHECK(file->direct());
      AioConfig config;
      config.block_size = 64 * 1024;
      config.queue_depth = 4;
      auto engine = Engine(backend, config);
      WriteAndReadBack(*file, *engine, file->record_count());
      CHECK(engine->stats().pieces >= file->record_count() * 2 * 5);
      CHECK(engine->stats().bytes_written == file->record_count() * file->record_stride());
      CHECK(engine->stats().bytes_read == file->record_count() * file->record_stride());
    }
  }
}

TEST_CASE("io_uring honours queue_depth, single_submit and overlap_events") {
  DSLAUNCH_SKIP_UNLESS(UringAvailable(), "io_uring", "io_uring_queue_init fails here");
  TempDir dir("/var/tmp");
  auto file = SwapFile::Create({dir.path(), SwapKind::kOptimizer, 0, 1 << 20, 4});
  REQUIRE(file.ok());
  for (bool single_submit : {false, true}) {
    for (bool overlap : {false, true}) {
      CAPTURE(single_submit);
      CAPTURE(overlap);
      AioConfig config;
      config.block_size = 64 * 1024;  // 16 pieces per record
      config.queue_depth = 3;
      config.single_submit = single_submit;
      config.overlap_events = overlap;
      auto engine = Engine(IoBackend::kUring, config);
      WriteAndReadBack(*file, *engine, 4);
      IoStats s = engine->stats();
      CHECK(s.pieces == 2 * 4 * 16);
      CHECK(s.max_in_flight == 3);
      if (single_submit) {
        CHECK(s.submit_calls == s.pieces);
      } else if (!overlap) {
        // Whole batches of queue_depth pieces: one submit per batch of each transfer group.
        CHECK(s.submit_calls <= s.pieces / 3 + 8);
      } else {
        CHECK(s.submit_calls < s.pieces);
      }
    }
  }
}

TEST_CASE("A read past the end of the file is data loss naming the offset, for both engines") {
  DSLAUNCH_SKIP_UNLESS(UringAvailable(), "io_uring", "io_uring_queue_init fails here");
  TempDir dir("/var/tmp");
  auto file = SwapFile::Create({dir.path(), SwapKind::kParam, 0, 4096, 1});
  REQUIRE(file.ok());
  for (IoBackend backend : {IoBackend::kUring, IoBackend::kSync}) {
    auto engine = Engine(backend, AioConfig{});
    auto buffer = *AlignedBuffer::Allocate(4096, 4096);
    auto t = engine->Start({IoOp::kRead, file->fd(), 8192, buffer.bytes()});
    REQUIRE(t.ok());
    Status s = engine->Wait(*t);
    CHECK(s.code() == StatusCode::kDataLoss);
    CHECK(s.message() == "read at offset 8192 stopped at the end of the file");
  }
}

TEST_CASE("A swap file is locked while open, removed at close, and found by the sweep after a crash") {
  TempDir dir("/var/tmp");
  std::string path;
  {
    auto file = SwapFile::Create({dir.path(), SwapKind::kOptimizer, 5, 1000, 3});
    REQUIRE(file.ok());
    path = file->path();
    CHECK(path == SwapDirectory(dir.path()) + "/optimizer.rank5.pid" + std::to_string(::getpid()) + ".swp");
    CHECK(file->record_stride() == AlignUp(1000, file->alignment()));
    CHECK(file->RecordOffset(2) == 2 * file->record_stride());
    CHECK(RemoveStaleSwapFiles(dir.path())->empty());  // locked: a live run's file
    auto again = SwapFile::Create({dir.path(), SwapKind::kOptimizer, 5, 1000, 3});
    CHECK(again.status().code() == StatusCode::kFailedPrecondition);
    CHECK(std::filesystem::exists(path));  // the failed second create left the first alone
    {
      auto other = SwapFile::Create({dir.path(), SwapKind::kParam, 5, 1000, 3});
      REQUIRE(other.ok());
    }
    CHECK(std::filesystem::exists(path));  // the directory stays while a file is in it
  }
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_FALSE(std::filesystem::exists(SwapDirectory(dir.path())));  // the last file took it
  CHECK(SwapFile::Create({dir.path(), SwapKind::kOptimizer, 5, 1000, 3}).ok());  // made again when needed
}

TEST_CASE("AlignedBuffer rounds up, aligns and refuses alignments that are not powers of two") {
  auto b = AlignedBuffer::Allocate(5000, 4096);
  REQUIRE(b.ok());
  CHECK(b->size() == 8192);
  CHECK(reinterpret_cast<uintptr_t>(b->data()) % 4096 == 0);
  CHECK(AlignedBuffer::Allocate(10, 3000).status().code() == StatusCode::kInvalidArgument);
  CHECK(DirectIoAlignment("/nonexistent/file") == kDefaultDirectIoAlignment);
}

}  // namespace
}  // namespace dslaunch::runtime::swap
