// Crash and failure injection for checkpoint saves (docs/checkpoint.md, "Crash safety").
//
// A SaveFault names a point of the save of one step on one rank:
//   before_shard   before the rank creates its shard file
//   mid_shard      after the shard is written and closed: the file is cut to half its size (what a
//                  crash in the middle of writing leaves), then the fault fires
//   before_meta    before rank 0 creates meta.json (its temporary file)
//   before_latest  before rank 0 replaces `latest` (after meta.json of that step is in place)
// FaultInjectingFileSystem wraps a FileSystem and, when the save reaches the point, calls the
// test's action with the path concerned: the worker's action (DSLAUNCH_CHECKPOINT_FAULT, parsed by
// ParseSaveFault) kills the process with SIGKILL; an in-process test's action returns an error,
// which the operation then fails with (or OK to let the operation go on).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "runtime/checkpoint/file_system.h"

namespace dslaunch::runtime {

enum class SaveFaultPoint { kBeforeShard, kMidShard, kBeforeMeta, kBeforeLatest };

// "before_shard", "mid_shard", "before_meta", "before_latest".
std::string_view SaveFaultPointName(SaveFaultPoint point);

struct SaveFault {
  SaveFaultPoint point = SaveFaultPoint::kBeforeShard;
  int rank = 0;
  int64_t step = 0;
  friend bool operator==(const SaveFault&, const SaveFault&) = default;
};

// Parses "POINT@RANK@STEP" (e.g. "mid_shard@1@4"): POINT one of the names above, RANK and STEP
// non-negative decimal integers. kInvalidArgument saying which part is wrong and what is expected.
Result<SaveFault> ParseSaveFault(std::string_view spec);

class FaultInjectingFileSystem : public FileSystemWrapper {
 public:
  // Called once when the save of `step` reaches `point`, with the file (or, before the shard, the
  // step directory) concerned. A non-OK status fails the operation with it.
  using Action = std::function<Status(SaveFaultPoint point, const std::string& path)>;

  // `target` must outlive the wrapper. Only the point and step of `fault` matter here: the caller
  // wraps the file system of the rank it names.
  FaultInjectingFileSystem(FileSystem& target, SaveFault fault, Action action);

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;

  // Whether the fault has fired.
  bool fired() const;

 private:
  class CutFile;
  // Fires once: calls the action. Caller does not hold mu_.
  Status Fire(const std::string& path);

  const SaveFault fault_;
  const Action action_;
  mutable std::mutex mu_;
  bool fired_ = false;                   // guarded by mu_
  std::optional<int64_t> meta_step_;     // the step whose meta.json was last renamed in; guarded by mu_
};

}  // namespace dslaunch::runtime
