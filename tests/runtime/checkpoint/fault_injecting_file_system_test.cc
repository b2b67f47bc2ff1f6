// The checkpoint save's file-system seam (runtime/checkpoint/file_system.h) and its fault injection
// (fault_injecting_file_system.h): the fault spec parser, and each point firing on the operation it
// names, for its step only, on real files in a temporary directory.
#include "runtime/checkpoint/fault_injecting_file_system.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/checkpoint/names.h"
#include "tests/support/subprocess.h"

namespace dslaunch::runtime {
namespace {

namespace fs = std::filesystem;

TEST_CASE("ParseSaveFault reads POINT@RANK@STEP") {
  CHECK(*ParseSaveFault("before_shard@1@4") == SaveFault{SaveFaultPoint::kBeforeShard, 1, 4});
  CHECK(*ParseSaveFault("mid_shard@0@12") == SaveFault{SaveFaultPoint::kMidShard, 0, 12});
  CHECK(*ParseSaveFault("before_meta@3@0") == SaveFault{SaveFaultPoint::kBeforeMeta, 3, 0});
  CHECK(*ParseSaveFault("before_latest@0@6") == SaveFault{SaveFaultPoint::kBeforeLatest, 0, 6});
}

TEST_CASE("ParseSaveFault says which part of a bad spec is wrong") {
  struct Case {
    const char* spec;
    const char* error;
  };
  const Case cases[] = {
      {"", "'': expected POINT@RANK@STEP, e.g. before_shard@1@4"},
      {"before_shard@1", "'before_shard@1': expected POINT@RANK@STEP, e.g. before_shard@1@4"},
      {"before_shard@1@4@5", "'before_shard@1@4@5': expected POINT@RANK@STEP, e.g. before_shard@1@4"},
      {"after_shard@1@4", "'after_shard@1@4': unknown point 'after_shard'; the points are before_shard, mid_shard, "
                          "before_meta, before_latest"},
      {"before_shard@x@4", "'before_shard@x@4': RANK must be a non-negative integer; expected POINT@RANK@STEP, e.g. "
                           "before_shard@1@4"},
      {"before_shard@-1@4", "'before_shard@-1@4': RANK must be a non-negative integer; expected POINT@RANK@STEP, "
                            "e.g. before_shard@1@4"},
      {"before_shard@1@", "'before_shard@1@': STEP must be a non-negative integer; expected POINT@RANK@STEP, e.g. "
                          "before_shard@1@4"},
      {"before_shard@1@4x", "'before_shard@1@4x': STEP must be a non-negative integer; expected POINT@RANK@STEP, "
                            "e.g. before_shard@1@4"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.spec);
    auto parsed = ParseSaveFault(c.spec);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
    CHECK(parsed.status().message() == c.error);
  }
}

// What a save of `step` does to the file system, in order (as SaveCheckpoint does it on one
// rank that is also rank 0); stops at the first error.
Status SimulateSave(FileSystem& files, const std::string& dir, int64_t step) {
  const std::string step_dir = dir + "/" + StepDirectoryName(step);
  DSLAUNCH_RETURN_IF_ERROR(files.CreateDirectories(step_dir));
  DSLAUNCH_ASSIGN_OR_RETURN(auto shard, files.NewWritableFile(step_dir + "/" + ShardFileName(0)));
  DSLAUNCH_RETURN_IF_ERROR(shard->Append("0123456789", 10));
  DSLAUNCH_RETURN_IF_ERROR(shard->Sync());
  DSLAUNCH_RETURN_IF_ERROR(shard->Close());
  DSLAUNCH_RETURN_IF_ERROR(WriteFileDurably(files, step_dir + "/" + std::string(kMetaFileName), "{}"));
  return WriteFileDurably(files, dir + "/" + std::string(kLatestFileName), LatestFileText(step));
}

TEST_CASE("Each fault point fires on its own operation of its own step, and the operation fails with the action's error") {
  struct Case {
    SaveFaultPoint point;
    std::string fired_at;     // relative to the directory
    bool shard, meta, latest;  // what step 4's save left
  };
  const Case cases[] = {
      {SaveFaultPoint::kBeforeShard, "global_step4", false, false, false},
      {SaveFaultPoint::kMidShard, "global_step4/rank00000.safetensors", true, false, false},
      {SaveFaultPoint::kBeforeMeta, "global_step4/meta.json.tmp", true, false, false},
      {SaveFaultPoint::kBeforeLatest, "latest", true, true, false},
  };
  for (const Case& c : cases) {
    CAPTURE(SaveFaultPointName(c.point));
    dslaunch::testing::TempDir dir;
    std::vector<std::string> fired;
    FaultInjectingFileSystem files(LocalFileSystem(), {c.point, 0, 4}, [&](SaveFaultPoint p, const std::string& path) {
      CHECK(p == c.point);
      fired.push_back(path);
      return InternalError("injected");
    });
    REQUIRE(SimulateSave(files, dir.path(), 2).ok());  // another step: nothing fires
    CHECK(fired.empty());
    const Status s = SimulateSave(files, dir.path(), 4);
    CHECK(s.message() == "injected");
    REQUIRE(fired == std::vector<std::string>{dir.path() + "/" + c.fired_at});
    CHECK(files.fired());
    const fs::path step_dir = fs::path(dir.path()) / "global_step4";
    CHECK(fs::exists(step_dir / "rank00000.safetensors") == c.shard);
    if (c.point == SaveFaultPoint::kMidShard) CHECK(fs::file_size(step_dir / "rank00000.safetensors") == 5);
    CHECK(fs::exists(step_dir / "meta.json") == c.meta);
    std::ifstream latest(dir.path() + "/latest");
    CHECK(std::string(std::istreambuf_iterator<char>(latest), {}) == "global_step2\n");
    CHECK_FALSE(fs::exists(dir.path() + "/latest.tmp"));
  }
}

TEST_CASE("A fault whose action returns OK lets the operation go on, and fires once") {
  dslaunch::testing::TempDir dir;
  int calls = 0;
  FaultInjectingFileSystem files(LocalFileSystem(), {SaveFaultPoint::kBeforeMeta, 0, 4},
                                 [&](SaveFaultPoint, const std::string&) {
                                   ++calls;
                                   return Status::Ok();
                                 });
  REQUIRE(SimulateSave(files, dir.path(), 4).ok());
  REQUIRE(SimulateSave(files, dir.path(), 4).ok());
  CHECK(calls == 1);
  CHECK(fs::exists(fs::path(dir.path()) / "global_step4" / "meta.json"));
}

TEST_CASE("WriteFileDurably replaces a file whole and leaves no temporary file") {
  dslaunch::testing::TempDir dir;
  const std::string path = dir.path() + "/latest";
  REQUIRE(WriteFileDurably(LocalFileSystem(), path, "global_step2\n").ok());
  REQUIRE(WriteFileDurably(LocalFileSystem(), path, "global_step4\n").ok());
  std::ifstream in(path);
  CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == "global_step4\n");
  CHECK_FALSE(fs::exists(path + ".tmp"));
  // Into a directory that does not exist: the error names the temporary file.
  const Status s = WriteFileDurably(LocalFileSystem(), dir.path() + "/missing/latest", "x");
  CHECK(s.message() == "create " + dir.path() + "/missing/latest.tmp: No such file or directory");
}

}  // namespace
}  // namespace dslaunch::runtime
