// What a checkpoint directory holds, and whether a step directory in it is a complete checkpoint
// (docs/checkpoint.md, "Which checkpoint a run resumes"): the I/O the resume plan
// (runtime/checkpoint/resume_plan.h) and retention decide from.
//
//   complete     meta.json present and consistent (its step is the directory's, the shards' own
//                headers agree with it) and every shard present with the size meta.json records
//   unfinished   no meta.json: a save that never finished (a crash's leftover); kNotFound
//   damaged      meta.json present, but it or a shard is not what the checkpoint says; kDataLoss
//
// The shards' CRC-32C is not read here (that reads the whole checkpoint): loading checks it for
// the ranges each rank reads (runtime/checkpoint/shard_reader.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/checkpoint/file_system.h"

namespace dslaunch::runtime {

// A checkpoint directory's entries, as names.h parses them. A directory that does not exist is
// an empty listing.
struct CheckpointDirectoryListing {
  std::string dir;
  bool latest_exists = false;
  // The entry `latest` names; nullopt when it is missing, unreadable or names nothing.
  std::optional<std::string> latest_name;
  std::string latest_problem;  // why latest_name is nullopt although `latest` exists
  struct StepEntry {
    int64_t step = 0;
    bool has_meta = false;  // meta.json exists in it
  };
  std::vector<StepEntry> steps;  // every global_step<N> entry, newest first
};

// Lists `dir` (only its names and whether each step directory has a meta.json). Fails only when
// `dir` exists but cannot be listed.
Result<CheckpointDirectoryListing> ListCheckpointDirectory(const std::string& dir);

// Whether `path` (= DIR/global_step<step>; step -1: a directory of another name) is a complete checkpoint: Ok; kNotFound when it has
// no meta.json (unfinished); kDataLoss naming the file and field for anything else (meta.json
// unreadable or inconsistent with the directory name, a shard missing, of another size than
// meta.json records, or whose header's step, rank, world size or slice differ from meta.json).
// Rank `rank` of `world` checks meta.json and the shards p with p % world == rank, so that the
// ranks share the work (rank 0 of 1 checks every shard).
Status CheckStepDirectory(const std::string& path, int64_t step, int rank = 0, int world = 1);

// Rank 0 after a save: deletes the checkpoints (step directories with meta.json) older than the
// newest `keep` complete ones (CheckStepDirectory, all shards), so that a damaged newer one never
// counts as one kept. Unfinished and damaged directories newer than those are left alone.
// Best effort: what cannot be listed or removed stays.
void ApplyRetention(FileSystem& files, const std::string& dir, int keep);

// Removes the unfinished step directories (no meta.json) of `dir` other than `except` (the step
// of a save in progress; nullopt: none is). Returns one line per directory: "removed P: ..." or
// "could not remove P: REASON". Best effort.
std::vector<std::string> RemoveUnfinishedStepDirectories(FileSystem& files, const std::string& dir,
                                                         std::optional<int64_t> except = std::nullopt);

}  // namespace dslaunch::runtime
