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

Status ShardReader::Read(const std::string& name, uint64_t begin, uint64_t end, float* out) {
  for (size_t p = 0; p < meta_.partitions.size(); ++p) {
    const CheckpointPartition& part = meta_.partitions[p];
    const uint64_t b = std::max<uint64_t>(begin, part.begin), e = std::min<uint64_t>(end, part.end);
    if (b >= e) continue;
    DSLAUNCH_ASSIGN_OR_RETURN(const SafetensorsFile* file, Open(p));
    const SafetensorsTensor* tensor = file->Find(name);
    const uint64_t elements = part.end - part.begin;
    if (tensor == nullptr || tensor->dtype != "F32" || tensor->bytes() != elements * sizeof(float)) {
      return DataLossError(PathOf(p) + ": no F32 tensor \"" + name + "\" of " + std::to_string(elements) + " elements");
    }
    DSLAUNCH_RETURN_IF_ERROR(
        file->Read(*tensor, (b - part.begin) * sizeof(float), out + (b - begin), (e - b) * sizeof(float)));
  }
  return Status::Ok();
}

}  // namespace dslaunch::runtime
