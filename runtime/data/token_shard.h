// Token shards in llm.c's `.bin` format, so data prepared for llm.c works unchanged:
//   header: 256 little-endian int32: [0] magic 20240520, [1] version 1, [2] token count, rest 0;
//   body:   token count x uint16 token ids.
// Encoding and validation are pure; ReadTokenShard/WriteTokenShard do the file I/O (the write is
// atomic: temporary file, fsync, rename). Format: docs/data.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dslaunch::runtime {

inline constexpr int32_t kShardMagic = 20240520;
inline constexpr int32_t kShardVersion = 1;
inline constexpr size_t kShardHeaderInts = 256;
inline constexpr size_t kShardHeaderBytes = kShardHeaderInts * sizeof(int32_t);

// The bytes of a shard holding `tokens`.
std::string EncodeTokenShard(std::span<const uint16_t> tokens);

// Parses a whole shard. kDataLoss naming `path` for a bad magic or version, or a size that does
// not match the header's token count (truncated or trailing bytes).
Result<std::vector<uint16_t>> DecodeTokenShard(std::string_view bytes, std::string_view path);

Result<std::vector<uint16_t>> ReadTokenShard(const std::string& path);
Status WriteTokenShard(const std::string& path, std::span<const uint16_t> tokens);

}  // namespace dslaunch::runtime
