// Safetensors files (https://github.com/huggingface/safetensors), the tensor container of
// checkpoints, so that a checkpoint loads in PyTorch/NumPy with `safetensors.safe_open`:
//   8 bytes   N, little-endian uint64: length of the header
//   N bytes   JSON header, UTF-8, padded with spaces to a multiple of 8:
//             {"__metadata__": {string: string},
//              "<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//   data      the tensors' bytes, little-endian, row-major; data_offsets are relative to the
//             first byte after the header and cover the data section exactly, without gaps or
//             overlaps.
// The whole format, what the reader rejects, and the file checksum: docs/safetensors.md.
//
// Errors name the file. Open/Read return kNotFound for a missing file, kDataLoss for a corrupt or
// truncated one, kInvalidArgument for a bad request; the writer returns kInvalidArgument for
// tensors that do not describe themselves consistently, and errno-based errors for I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "runtime/checkpoint/file_system.h"
#include "runtime/core/dtype.h"

namespace dslaunch::runtime {

// Header length limit of the reference implementation: a larger header is treated as corrupt.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// Bytes per element of a safetensors dtype name ("F32" 4, "F16" 2, "BF16" 2, "I64" 8, "I32" 4,
// "U8" 1, "BOOL" 1, "F64" 8, ...); nullopt for a name this reader does not know.
std::optional<size_t> SafetensorsDTypeSize(std::string_view dtype);

// The safetensors name of a runtime dtype: "F32", "F16", "BF16".
std::string_view SafetensorsDTypeName(DType dtype);

// One tensor of a file. begin/end are byte offsets relative to the start of the data section.
struct SafetensorsTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;  // empty for a 0-d tensor (one element)
  uint64_t begin = 0, end = 0;

  uint64_t bytes() const { return end - begin; }
};

// ---- Writing --------------------------------------------------------------------------------

// Hands a streamed tensor's bytes to the writer, a piece at a time, in order.
using TensorAppend = std::function<Status(const void* data, size_t bytes)>;

// A tensor to write; `data` (read-only, `bytes` long, may be null when bytes is 0) is borrowed
// for the duration of the WriteSafetensors call. Or, with `data` null, `source` produces the
// bytes: it is called once, while the file is written, and must append exactly `bytes` bytes
// (fewer or more is kInternal); its error stops the write. The file is the same either way.
struct TensorData {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t bytes = 0;
  std::function<Status(const TensorAppend& append)> source = nullptr;
};

struct WriteOptions {
  bool fsync = true;    // fsync the file before returning (and its directory after an atomic rename)
  bool atomic = false;  // write PATH.tmp and rename it over PATH, so PATH is never seen half-written
  FileSystem* file_system = nullptr;  // where the file goes; null: LocalFileSystem()
};

struct WriteResult {
  uint64_t bytes = 0;    // size of the whole file
  uint32_t crc32c = 0;   // CRC-32C (common/crc32c.h) of the whole file, as FileCrc32c computes it
};

// Writes `tensors`, laid out in the order given, and `metadata` (omitted from the header when
// empty) to `path`. The tensors' bytes go straight from `data` to the file in large writes (small
// tensors are gathered into one buffer), with the CRC-32C computed on the way.
// kInvalidArgument, before anything is written, for an empty, duplicate or "__metadata__" name,
// an unknown dtype, a negative dimension, `bytes` != elements x element size, or a name, key or
// value that is not valid UTF-8. On an I/O error the partial file (or PATH.tmp) is removed; with
// `atomic` an existing PATH is left as it was.
Result<WriteResult> WriteSafetensors(const std::string& path, const std::vector<TensorData>& tensors,
                                     const std::map<std::string, std::string>& metadata,
                                     const WriteOptions& options = {});

// ---- Reading --------------------------------------------------------------------------------

// An open safetensors file whose header has been validated. Owns the file descriptor (movable,
// not copyable). Read() uses pread only, so one file may be read from several threads at once.
class SafetensorsFile {
 public:
  // Opens `path` and validates its header strictly (see docs/safetensors.md, "What the reader
  // rejects"): kNotFound when the file does not exist, kDataLoss naming the file and the problem
  // for anything that is not a well-formed safetensors file of exactly this size.
  static Result<SafetensorsFile> Open(const std::string& path);

  // CRC-32C of the whole file at `path`, read sequentially in large chunks.
  static Result<uint32_t> FileCrc32c(const std::string& path);

  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  // Tensors in the order of their data in the file (for files from WriteSafetensors, the order
  // they were written in).
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  // The tensor called `name`, or null. The pointer lives as long as this object.
  const SafetensorsTensor* Find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Absolute file offset of the data section (8 + header length), and the file's size.
  uint64_t data_start() const { return data_start_; }
  uint64_t file_size() const { return file_size_; }

  // Reads `bytes` bytes of tensor `t` starting `byte_offset` bytes into its data, into `out`.
  // kInvalidArgument when the range is not inside the tensor; kDataLoss when the file has become
  // shorter since Open.
  Status Read(const SafetensorsTensor& t, uint64_t byte_offset, void* out, uint64_t bytes) const;

 private:
  SafetensorsFile() = default;

  std::string path_;
  int fd_ = -1;
  uint64_t data_start_ = 0;
  uint64_t file_size_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> position in tensors_
  std::map<std::string, std::string> metadata_;
};

}  // namespace dslaunch::runtime
