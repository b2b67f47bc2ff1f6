#include "runtime/swap/swap_directory.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/unique_fd.h"
#include "runtime/swap/swap_file_name.h"
#include "tests/support/subprocess.h"

namespace dslaunch::runtime::swap {
namespace {

constexpr std::string_view kKey = "zero_optimization.offload_optimizer.nvme_path";

// Directories on the disk-backed /var/tmp.
struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("/var/tmp") {}
};

TEST_CASE("Swap file names round-trip and near misses are not swap files") {
  SwapFileName n{SwapKind::kParam, 12, 4711};
  CHECK(FormatSwapFileName(n) == "param.rank12.pid4711.swp");
  CHECK(ParseSwapFileName(FormatSwapFileName(n)) == n);
  SwapFileName o{SwapKind::kOptimizer, 0, 1};
  CHECK(ParseSwapFileName(FormatSwapFileName(o)) == o);
  for (const char* bad : {"", "optimizer.rank0.pid1.swp.tmp", "optimizer.rank.pid1.swp", "optimizer.rank01.pid1.swp",
                          "optimizer.rank-1.pid1.swp", "grads.rank0.pid1.swp", "optimizer.rank0.pid1", "notes.txt",
                          "optimizer.rank0.pid99999999999999999999999.swp"}) {
    CAPTURE(bad);
    CHECK_FALSE(ParseSwapFileName(bad).has_value());
  }
  CHECK(SwapDirectory("/nvme") == "/nvme/dslaunch-swap");
  CHECK(SwapDirectory("/nvme/") == "/nvme/dslaunch-swap");
}

TEST_CASE("CheckFreeSpace names the path and both byte counts") {
  CHECK(CheckFreeSpace("/nvme", 100, 100, kKey).ok());
  Status s = CheckFreeSpace("/nvme", 101, 100, kKey);
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  CHECK(s.message().find("zero_optimization.offload_optimizer.nvme_path '/nvme': needs 101 bytes for swap files, 100 bytes are free") == 0);
}

TEST_CASE("CheckSwapDirectory refuses a missing path, a file, an unwritable place and a full disk") {
  TempDir dir;
  CHECK(CheckSwapDirectory(dir.path(), 4096, kKey).ok());
  CHECK(std::filesystem::is_directory(SwapDirectory(dir.path())));
  CHECK(std::filesystem::is_empty(SwapDirectory(dir.path())));  // the probe file is gone

  Status s = CheckSwapDirectory(dir.path() + "/missing", 1, kKey);
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  CHECK(s.message().find(std::string(kKey) + " '" + dir.path() + "/missing': No such file or directory") == 0);

  std::ofstream(dir.path() + "/file") << "x";
  s = CheckSwapDirectory(dir.path() + "/file", 1, kKey);
  CHECK(s.message().find("'" + dir.path() + "/file': not a directory") != std::string::npos);

  // /proc takes no new entries, not even from root.
  s = CheckSwapDirectory("/proc", 1, kKey);
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  CHECK(s.message().find("'/proc': cannot create") != std::string::npos);

  constexpr uint64_t kExabyte = uint64_t{1} << 60;
  s = CheckSwapDirectory(dir.path(), kExabyte, kKey);
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  CHECK(s.message().find("needs " + std::to_string(kExabyte) + " bytes") != std::string::npos);

  CHECK(CheckSwapDirectory("", 1, kKey).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("RemoveStaleSwapFiles removes unlocked files of ended processes and leaves locked ones, live owners' and other names") {
  TempDir dir;
  CHECK(RemoveStaleSwapFiles(dir.path())->empty());  // no swap sub-directory yet
  std::string swap_dir = SwapDirectory(dir.path());
  std::filesystem::create_directory(swap_dir);
  std::string stale = swap_dir + "/" + FormatSwapFileName({SwapKind::kOptimizer, 3, 999999});
  // Pids above pid_max (32768 by default, 4194304 at most): no such process.
  std::string live = swap_dir + "/" + FormatSwapFileName({SwapKind::kParam, 0, 999998});
  // Not locked, but its owner (another process, alive: the parent) may be between creating and
  // locking it.
  std::string creating = swap_dir + "/" + FormatSwapFileName({SwapKind::kParam, 1, static_cast<long>(::getppid())});
  // Not locked and named with this process's pid: left by an earlier process of the same pid.
  std::string mine = swap_dir + "/" + FormatSwapFileName({SwapKind::kParam, 2, static_cast<long>(::getpid())});
  std::string other = swap_dir + "/notes.txt";
  std::ofstream(stale) << "12345";
  std::ofstream(live) << "x";
  std::ofstream(other) << "keep";
  std::ofstream(creating) << "y";
  std::ofstream(mine) << "z";
  // A live run holds its file's lock; flock conflicts between open files even in one process.
  UniqueFd held(::open(live.c_str(), O_RDONLY));
  REQUIRE(::flock(held.get(), LOCK_EX | LOCK_NB) == 0);

  auto removed = RemoveStaleSwapFiles(dir.path());
  REQUIRE(removed.ok());
  REQUIRE(removed->size() == 2);
  std::sort(removed->begin(), removed->end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  CHECK((*removed)[0].path == stale);
  CHECK((*removed)[0].bytes == 5);
  CHECK((*removed)[1].path == mine);
  CHECK_FALSE(std::filesystem::exists(stale));
  CHECK(std::filesystem::exists(live));
  CHECK(std::filesystem::exists(other));
  CHECK(std::filesystem::exists(creating));

  held.Reset();  // the live run ends without cleaning up: the next start removes its file
  removed = RemoveStaleSwapFiles(dir.path());
  REQUIRE(removed->size() == 1);
  CHECK((*removed)[0].path == live);
}

}  // namespace
}  // namespace dslaunch::runtime::swap
