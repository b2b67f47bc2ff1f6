// The I/O half of hang detection against real files: creation, write detection, bounded reads,
// warnings once per rank.
#include "agent/progress/progress_files.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tests/support/subprocess.h"

namespace dslaunch::agent {
namespace {

using dslaunch::testing::TempDir;

void Write(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
}

bool Contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

// Sets the file's modification time: a later write of the same size, without waiting for the
// kernel's file clock to tick.
void SetMtime(const std::string& path, time_t sec, long nsec) {
  timespec times[2] = {{0, UTIME_OMIT}, {sec, nsec}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

JobLogDir OpenJobDir(const TempDir& dir) {
  auto logs = JobLogDir::Open({dir.path() + "/job-1", dir.path(), "job-1", ::getuid()});
  REQUIRE_MESSAGE(logs.ok(), logs.status().ToString());
  return std::move(*logs);
}

TEST_CASE("A rank's progress file is rankN.progress, created empty and private, once") {
  CHECK(ProgressFileName(0) == "rank0.progress");
  CHECK(ProgressFileName(13) == "rank13.progress");
  TempDir dir;
  JobLogDir logs = OpenJobDir(dir);
  auto path = CreateProgressFile(logs, 3);
  REQUIRE_MESSAGE(path.ok(), path.status().ToString());
  CHECK(*path == dir.path() + "/job-1/rank3.progress");
  struct stat st {};
  REQUIRE(::stat(path->c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK(st.st_size == 0);
  CHECK((st.st_mode & 0777) == 0600);
  auto again = CreateProgressFile(logs, 3);
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().code() == StatusCode::kFailedPrecondition);
  CHECK(Contains(again.status().message(), "rank3.progress' already exists"));
}

TEST_CASE("ProgressFiles reports each write once, parsed, and nothing before the first") {
  TempDir dir;
  const std::string path = dir.path() + "/rank0.progress";
  Write(path, "");
  ProgressFiles files;
  files.Watch(0, path);
  CHECK(files.Poll().empty());  // the empty file at Watch is the baseline, not a report

  Write(path, "41 timeout=90\n");
  auto events = files.Poll();
  REQUIRE(events.size() == 1);
  CHECK(events[0].rank == 0);
  CHECK(events[0].report == ProgressReport{41, std::chrono::milliseconds(90000), {}});
  CHECK_FALSE(events[0].warning);
  CHECK(files.Poll().empty());

  SUBCASE("a rewrite of the same size is told by its modification time (nanoseconds)") {
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    Write(path, "42 timeout=90\n");
    SetMtime(path, st.st_mtim.tv_sec, st.st_mtim.tv_nsec + (st.st_mtim.tv_nsec < 999999999 ? 1 : -1));
    events = files.Poll();
    REQUIRE(events.size() == 1);
    CHECK(events[0].report == ProgressReport{42, std::chrono::milliseconds(90000), {}});
  }
  SUBCASE("an empty write is a report without a step") {
    Write(path, "");
    events = files.Poll();
    REQUIRE(events.size() == 1);
    CHECK(events[0].report == ProgressReport{});
  }
  SUBCASE("a file renamed over it is a report") {
    Write(path + ".tmp", "43\n");
    REQUIRE(std::rename((path + ".tmp").c_str(), path.c_str()) == 0);
    events = files.Poll();
    REQUIRE(events.size() == 1);
    CHECK(events[0].report == ProgressReport{43, std::nullopt, {}});
  }
}

TEST_CASE("ProgressFiles counts a malformed write as progress and warns once per rank") {
  TempDir dir;
  const std::string p0 = dir.path() + "/rank0.progress", p1 = dir.path() + "/rank1.progress";
  Write(p0, "");
  Write(p1, "");
  ProgressFiles files;
  files.Watch(0, p0);
  files.Watch(1, p1);
  Write(p0, "step 4\n");
  Write(p1, "1\n");
  auto events = files.Poll();
  REQUIRE(events.size() == 2);
  CHECK(events[0].rank == 0);
  CHECK(events[0].report == ProgressReport{});
  REQUIRE(events[0].warning);
  CHECK(*events[0].warning == "rank 0: progress file '" + p0 +
                                  "': step 'step' is not a non-negative integer (expected 'STEP "
                                  "[timeout=SECONDS] [NAME=NUMBER ...]'); the write still counts as progress");
  CHECK(events[1].rank == 1);
  CHECK(events[1].report == ProgressReport{1, std::nullopt, {}});
  CHECK_FALSE(events[1].warning);

  Write(p0, "another bad one, longer\n");
  events = files.Poll();
  REQUIRE(events.size() == 1);
  CHECK(events[0].report == ProgressReport{});
  CHECK_FALSE(events[0].warning);  // once per rank

  Write(p1, std::string(4096, '7'));  // too long: read no further than one byte past the limit
  events = files.Poll();
  REQUIRE(events.size() == 1);
  CHECK(events[0].rank == 1);
  CHECK(events[0].report == ProgressReport{});
  REQUIRE(events[0].warning);
  CHECK(Contains(*events[0].warning, "a report of more than 512 bytes"));
}

TEST_CASE("ProgressFiles neither blocks on nor follows what replaces the file") {
  TempDir dir;
  const std::string path = dir.path() + "/rank0.progress";
  Write(path, "");
  ProgressFiles files;
  files.Watch(0, path);
  SUBCASE("a FIFO") {
    REQUIRE(std::filesystem::remove(path));
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    auto events = files.Poll();  // an open for reading would block here without O_NONBLOCK
    REQUIRE(events.size() == 1);
    CHECK(events[0].report == ProgressReport{});
    REQUIRE(events[0].warning);
    CHECK(Contains(*events[0].warning, "it is not a regular file"));
  }
  SUBCASE("a symbolic link") {
    Write(dir.path() + "/elsewhere", "5\n");
    REQUIRE(std::filesystem::remove(path));
    std::filesystem::create_symlink(dir.path() + "/elsewhere", path);
    auto events = files.Poll();
    REQUIRE(events.size() == 1);
    CHECK(events[0].report == ProgressReport{});
    REQUIRE(events[0].warning);
    CHECK(Contains(*events[0].warning, "cannot open it"));
  }
}

TEST_CASE("ProgressFiles: a removed file is no report, a file written again is") {
  TempDir dir;
  const std::string path = dir.path() + "/rank2.progress";
  Write(path, "");
  ProgressFiles files;
  files.Watch(2, path);
  REQUIRE(std::filesystem::remove(path));
  auto events = files.Poll();
  REQUIRE(events.size() == 1);
  CHECK(events[0].rank == 2);
  CHECK_FALSE(events[0].report);
  REQUIRE(events[0].warning);
  CHECK(*events[0].warning == "rank 2: progress file '" + path +
                                  "' was removed; no report from this rank is seen until the file is written again");
  CHECK(files.Poll().empty());
  Write(path, "8");
  events = files.Poll();
  REQUIRE(events.size() == 1);
  CHECK(events[0].report == ProgressReport{8, std::nullopt, {}});
}

TEST_CASE("ProgressFiles::Finish reads a last write and stops watching the rank") {
  TempDir dir;
  const std::string path = dir.path() + "/rank0.progress";
  Write(path, "");
  ProgressFiles files;
  files.Watch(0, path);
  CHECK_FALSE(files.Finish(5));  // not watched
  Write(path, "99\n");
  auto last = files.Finish(0);
  REQUIRE(last);
  CHECK(last->report == ProgressReport{99, std::nullopt, {}});
  Write(path, "100\n");
  CHECK(files.Poll().empty());
  CHECK_FALSE(files.Finish(0));
}

}  // namespace
}  // namespace dslaunch::agent
