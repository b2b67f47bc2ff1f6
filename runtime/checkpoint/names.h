// Every file and directory name of a checkpoint (docs/checkpoint.md, "Layout"), made and parsed in
// one place:
//
//   DIR/latest                           LatestFileText(step) = "global_step<N>\n"
//   DIR/global_step<N>/                  StepDirectoryName(N), ParseStepDirectoryName
//   DIR/global_step<N>/rank<r>.safetensors  ShardFileName(r) (r in 5 digits), ParseShardFileName
//   DIR/global_step<N>/meta.json         kMetaFileName
//
// and the temporary name a durable write goes through (TemporaryFileName). Pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dslaunch::runtime {

// Written last into a step directory: a checkpoint is complete once it exists.
inline constexpr std::string_view kMetaFileName = "meta.json";
// In the checkpoint directory: the name of the newest complete checkpoint.
inline constexpr std::string_view kLatestFileName = "latest";

// "global_step<step>"; step >= 0.
std::string StepDirectoryName(int64_t step);
// The step of a "global_step<N>" name: N decimal digits, no sign, no leading zero (except "0"),
// fitting int64, nothing else. nullopt for any other name.
std::optional<int64_t> ParseStepDirectoryName(std::string_view name);

// "rank<rank, 5 digits>.safetensors"; rank >= 0 (more digits past 99999).
std::string ShardFileName(int rank);
// The rank of a ShardFileName name; nullopt for any other name.
std::optional<int> ParseShardFileName(std::string_view name);

// What `latest` holds when it names step `step`'s checkpoint: "global_step<N>\n".
std::string LatestFileText(int64_t step);
// The directory name `latest` holds (its text without trailing newlines and spaces); nullopt when
// that is empty or contains '/' (it must name an entry of the checkpoint directory).
std::optional<std::string> ParseLatestFileText(std::string_view text);

// `name` in directory `dir` ("DIR/name"; "name" alone for an empty dir), as std::filesystem joins them.
std::string PathIn(const std::string& dir, std::string_view name);

// The name a durable write of `name` goes through before it is renamed: "<name>.tmp".
std::string TemporaryFileName(std::string_view name);

}  // namespace dslaunch::runtime
