#include "runtime/checkpoint/checkpoint_directory.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "common/file_io.h"
#include "runtime/checkpoint/meta.h"
#include "runtime/checkpoint/names.h"
#include "runtime/checkpoint/safetensors.h"

namespace dslaunch::runtime {
namespace fs = std::filesystem;
namespace {

// The shard of partition `p` against meta.json: present, its size, and its header's own record
// of step, rank, world size and slice (ShardHeaderOf, written by the save next to the tensors).
Status CheckShard(const std::string& path, const CheckpointMeta& meta, size_t p) {
  const CheckpointPartition& part = meta.partitions[p];
  const std::string file = PathIn(path, part.file);
  std::error_code ec;
  if (!fs::exists(file, ec)) return DataLossError(file + " is missing (meta.json lists it)");
  const uintmax_t size = fs::file_size(file, ec);
  if (ec) return DataLossError(file + ": cannot read its size: " + ec.message());
  if (size != part.bytes) {
    return DataLossError(file + " is " + std::to_string(size) + " bytes, meta.json records " +
                         std::to_string(part.bytes));
  }
  DSLAUNCH_ASSIGN_OR_RETURN(SafetensorsFile shard, SafetensorsFile::Open(file));
  const std::map<std::string, std::string> expected = ShardHeaderOf(meta.step, meta.world_size, part);
  for (const auto& [key, value] : expected) {
    auto it = shard.metadata().find(key);
    const std::string found = it == shard.metadata().end() ? "nothing" : "\"" + it->second + "\"";
    if (it == shard.metadata().end() || it->second != value) {
      return DataLossError(file + ": its header records " + key + " " + found + ", meta.json " + value);
    }
  }
  return Status::Ok();
}

}  // namespace

Result<CheckpointDirectoryListing> ListCheckpointDirectory(const std::string& dir) {
  CheckpointDirectoryListing listing;
  listing.dir = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return listing;
  const std::string latest = PathIn(dir, kLatestFileName);
  listing.latest_exists = fs::exists(latest, ec);
  if (listing.latest_exists) {
    Result<std::string> text = ReadFile(latest);
    if (!text.ok()) {
      listing.latest_problem = "cannot be read: " + text.status().message();
    } else {
      listing.latest_name = ParseLatestFileText(*text);
      if (!listing.latest_name) listing.latest_problem = "does not name a checkpoint directory";
    }
  }
  fs::directory_iterator entries(dir, ec);
  if (ec) return InternalError("cannot list " + dir + ": " + ec.message());
  for (const fs::directory_entry& entry : entries) {
    const std::optional<int64_t> step = ParseStepDirectoryName(entry.path().filename().string());
    if (!step || !entry.is_directory(ec)) continue;
    listing.steps.push_back({*step, fs::exists(entry.path() / kMetaFileName, ec)});
  }
  std::sort(listing.steps.begin(), listing.steps.end(),
            [](const auto& a, const auto& b) { return a.step > b.step; });
  return listing;
}

Status CheckStepDirectory(const std::string& path, int64_t step, int rank, int world) {
  const std::string meta_path = PathIn(path, kMetaFileName);
  std::error_code ec;
  if (!fs::exists(meta_path, ec)) return NotFoundError(path + " has no meta.json: a save that did not finish");
  DSLAUNCH_ASSIGN_OR_RETURN(std::string text, ReadFile(meta_path));
  DSLAUNCH_ASSIGN_OR_RETURN(CheckpointMeta meta, CheckpointMetaFromJson(text, meta_path));
  if (step >= 0 && meta.step != step) {
    return DataLossError(meta_path + ": $.step is " + std::to_string(meta.step) + ", but the directory is " +
                         StepDirectoryName(step));
  }
  for (size_t p = static_cast<size_t>(rank); p < meta.partitions.size(); p += static_cast<size_t>(world)) {
    DSLAUNCH_RETURN_IF_ERROR(CheckShard(path, meta, p));
  }
  return Status::Ok();
}

void ApplyRetention(FileSystem& files, const std::string& dir, int keep) {
  Result<CheckpointDirectoryListing> listing = ListCheckpointDirectory(dir);
  if (!listing.ok()) return;
  int kept = 0;
  for (const auto& entry : listing->steps) {  // newest first
    if (!entry.has_meta) continue;
    const std::string path = PathIn(dir, StepDirectoryName(entry.step));
    if (kept < keep) {
      if (CheckStepDirectory(path, entry.step).ok()) ++kept;
      continue;
    }
    files.RemoveAll(path).IgnoreError();
  }
}

std::vector<std::string> RemoveUnfinishedStepDirectories(FileSystem& files, const std::string& dir,
                                                         std::optional<int64_t> except) {
  std::vector<std::string> lines;
  Result<CheckpointDirectoryListing> listing = ListCheckpointDirectory(dir);
  if (!listing.ok()) return lines;
  for (const auto& entry : listing->steps) {
    if (entry.has_meta || entry.step == except) continue;
    const std::string path = PathIn(dir, StepDirectoryName(entry.step));
    const Status removed = files.RemoveAll(path);
    lines.push_back(removed.ok() ? "removed " + path + ": a save that did not finish (no meta.json)"
                                 : "could not remove " + path + " (a save that did not finish): " + removed.message());
  }
  return lines;
}

}  // namespace dslaunch::runtime
