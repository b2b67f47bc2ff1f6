#include "runtime/data/token_shard.h"

#include <bit>
#include <cstring>

#include "common/file_io.h"

namespace dslaunch::runtime {
namespace {

static_assert(std::endian::native == std::endian::little, "token shards are little-endian; add byte swaps");

int32_t LoadInt32(const char* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace

std::string EncodeTokenShard(std::span<const uint16_t> tokens) {
  std::vector<int32_t> header(kShardHeaderInts, 0);
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  std::string out(kShardHeaderBytes + tokens.size_bytes(), '\0');
  std::memcpy(out.data(), header.data(), kShardHeaderBytes);
  if (!tokens.empty()) std::memcpy(out.data() + kShardHeaderBytes, tokens.data(), tokens.size_bytes());
  return out;
}

Result<std::vector<uint16_t>> DecodeTokenShard(std::string_view bytes, std::string_view path) {
  std::string where(path);
  if (bytes.size() < kShardHeaderBytes) {
    return DataLossError(where + ": " + std::to_string(bytes.size()) + " bytes is shorter than the " +
                         std::to_string(kShardHeaderBytes) + "-byte header of a token shard");
  }
  int32_t magic = LoadInt32(bytes.data());
  int32_t version = LoadInt32(bytes.data() + 4);
  int32_t count = LoadInt32(bytes.data() + 8);
  if (magic != kShardMagic) {
    return DataLossError(where + ": magic " + std::to_string(magic) + " is not " + std::to_string(kShardMagic) +
                         ": not an llm.c token shard");
  }
  if (version != kShardVersion) {
    return DataLossError(where + ": token shard version " + std::to_string(version) + " (expected " +
                         std::to_string(kShardVersion) + ")");
  }
  size_t expected = kShardHeaderBytes + static_cast<size_t>(count < 0 ? 0 : count) * sizeof(uint16_t);
  if (count < 0 || bytes.size() != expected) {
    return DataLossError(where + ": header says " + std::to_string(count) + " tokens (" + std::to_string(expected) +
                         " bytes) but the file has " + std::to_string(bytes.size()) + " bytes");
  }
  std::vector<uint16_t> tokens(static_cast<size_t>(count));
  if (count > 0) std::memcpy(tokens.data(), bytes.data() + kShardHeaderBytes, tokens.size() * sizeof(uint16_t));
  return tokens;
}

Result<std::vector<uint16_t>> ReadTokenShard(const std::string& path) {
  DSLAUNCH_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  return DecodeTokenShard(bytes, path);
}

Status WriteTokenShard(const std::string& path, std::span<const uint16_t> tokens) {
  return WriteFileAtomically(path, EncodeTokenShard(tokens));
}

}  // namespace dslaunch::runtime
