#include "runtime/checkpoint/shard_reader.h"

#include <algorithm>
#include <filesystem>

#include "common/crc32c.h"

namespace dslaunch::runtime {

ShardReader::ShardReader(std::string dir, const CheckpointMeta& meta)
    : dir_(std::move(dir)), meta_(meta), files_(meta.partitions.size()) {}

std::string ShardReader::PathOf(size_t p) const {
  return (std::filesystem::path(dir_) / meta_.partitions[p].file).string();
}

Result<const SafetensorsFile*> ShardReader::Open(size_t p) {
  if (!files_[p]) {
    const std::string file = PathOf(p);
    const uint32_t recorded = meta_.partitions[p].crc32c;
    DSLAUNCH_ASSIGN_OR_RETURN(uint32_t crc, SafetensorsFile::FileCrc32c(file));
    if (crc != recorded) {
      return DataLossError(file + " is corrupt: CRC-32C " + Crc32cText(crc) + ", meta.json records " +
                           Crc32cText(recorded));
    }
    DSLAUNCH_ASSIGN_OR_RETURN(SafetensorsFile opened, SafetensorsFile::Open(file));
    files_[p].emplace(std::move(opened));
  }
  return &*files_[p];
}

Status ShardReader::VerifyAll() {
  for (size_t p = 0; p < files_.size(); ++p) DSLAUNCH_RETURN_IF_ERROR(Open(p).status());
  return Status::Ok();
}

void ShardReader::BuildIndex() {
  for (size_t p = 0; p < meta_.partitions.size(); ++p) {
    const CheckpointPartition& part = meta_.partitions[p];
    if (part.pieces.empty()) {
      if (part.end > part.begin) runs_.push_back({part.begin, part.end - part.begin, p, 0});
      continue;
    }
    uint64_t offset = 0;
    ForEachRun(part.pieces, [&](uint64_t begin, uint64_t count) {
      runs_.push_back({begin, count, p, offset});
      offset += count;
    });
  }
  std::sort(runs_.begin(), runs_.end(), [](const Run& a, const Run& b) { return a.begin < b.begin; });
  indexed_ = true;
}

Status ShardReader::Read(const std::string& name, uint64_t begin, uint64_t end, float* out) {
  if (!indexed_) BuildIndex();
  // The runs overlapping [begin, end): from the last one starting at or before begin.
  auto it = std::upper_bound(runs_.begin(), runs_.end(), begin, [](uint64_t at, const Run& r) { return at < r.begin; });
  if (it != runs_.begin()) --it;
  for (; it != runs_.end() && it->begin < end; ++it) {
    const uint64_t b = std::max<uint64_t>(begin, it->begin), e = std::min<uint64_t>(end, it->begin + it->count);
    if (b >= e) continue;
    DSLAUNCH_ASSIGN_OR_RETURN(const SafetensorsFile* file, Open(it->partition));
    const SafetensorsTensor* tensor = file->Find(name);
    const uint64_t elements = meta_.partitions[it->partition].elements();
    if (tensor == nullptr || tensor->dtype != "F32" || tensor->bytes() != elements * sizeof(float)) {
      return DataLossError(PathOf(it->partition) + ": no F32 tensor \"" + name + "\" of " + std::to_string(elements) +
                           " elements");
    }
    DSLAUNCH_RETURN_IF_ERROR(file->Read(*tensor, (it->offset + (b - it->begin)) * sizeof(float), out + (b - begin),
                                        (e - b) * sizeof(float)));
  }
  return Status::Ok();
}

}  // namespace dslaunch::runtime
