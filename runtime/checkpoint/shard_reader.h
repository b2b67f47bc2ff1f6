// ShardReader: reads a checkpoint's state tensors by global element range, whatever world size
// and grid saved it (docs/checkpoint.md, "Loading"). Used by LoadCheckpoint (each rank's ranges) and by
// ExportCheckpoint (the whole "master" tensor).
//
// Each shard file is opened and checked against the CRC-32C meta.json records the first time it is
// needed (or all at once with VerifyAll), and read with pread afterwards. Errors name the file:
// kNotFound for a missing shard, kDataLoss for a corrupt or truncated one ("... is corrupt:
// CRC-32C 1a2b3c4d, meta.json records 5e6f7a8b") or one without the tensor asked for.
// Not thread-safe: one thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/checkpoint/meta.h"
#include "runtime/checkpoint/safetensors.h"

namespace dslaunch::runtime {

class ShardReader {
 public:
  // `dir` is the global_step<N> directory `meta` was read from; `meta` must outlive the reader.
  ShardReader(std::string dir, const CheckpointMeta& meta);

  // Opens and checks every partition's shard (even one holding no elements).
  Status VerifyAll();

  // Elements [begin, end) of the fp32 state tensor `name` (indices into the whole flat tensor, as
  // meta.json's partitions count them) into `out` (end - begin elements), from every partition
  // that overlaps the range.
  Status Read(const std::string& name, uint64_t begin, uint64_t end, float* out);

 private:
  // The shard of partition `p`, opened and checked once.
  Result<const SafetensorsFile*> Open(size_t p);
  std::string PathOf(size_t p) const;

  // Every run of the partitions (a version 2 partition's pieces row by row), sorted by begin, so
  // that a read finds the runs it overlaps without looking at the others; built on the first Read.
  struct Run {
    uint64_t begin = 0, count = 0;  // elements [begin, begin + count) of the whole state
    size_t partition = 0;
    uint64_t offset = 0;  // where they start in the partition's tensors (elements)
  };
  void BuildIndex();

  const std::string dir_;
  const CheckpointMeta& meta_;
  std::vector<std::optional<SafetensorsFile>> files_;  // per partition, once opened
  std::vector<Run> runs_;
  bool indexed_ = false;
};

}  // namespace dslaunch::runtime
