#include "runtime/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/crc32c.h"
#include "runtime/checkpoint/file_system.h"

namespace dslaunch::runtime {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors is little-endian; add byte swaps");

// One read or write system call moves at most this much: large enough that the per-call cost
// vanishes against the copy, small enough to keep the gather buffer and FileCrc32c's buffer modest.
constexpr size_t kIoChunkBytes = size_t{8} << 20;
// Tensors at least this large are written straight from the caller's memory; smaller ones are
// gathered into one buffer so that a model of many small tensors still makes few, large writes.
constexpr size_t kDirectWriteBytes = size_t{1} << 20;
// The header is padded to this so the data section (and so every tensor of a natural-aligned
// dtype laid out in decreasing element size) starts aligned, as the reference writer does.
constexpr size_t kHeaderAlignment = 8;
constexpr size_t kLengthPrefixBytes = 8;
constexpr std::string_view kMetadataKey = "__metadata__";

struct DTypeEntry {
  std::string_view name;
  size_t size;
};
// The byte-sized dtypes of the safetensors specification (sub-byte float formats are not supported).
constexpr DTypeEntry kDTypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},   {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
    {"BF16", 2}, {"I32", 4}, {"U32", 4},  {"F32", 4},     {"I64", 8},     {"U64", 8}, {"F64", 8},
};

// Number of elements of `shape`; nullopt for a negative dimension or an overflow of uint64.
std::optional<uint64_t> ElementCount(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return std::nullopt;
  }
  return n;
}

std::string CompactShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string Range(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

// ---- Header encoding (pure) -------------------------------------------------------------------

// The padded header text for `tensors` laid out in order. Key order follows the reference writer:
// "__metadata__" first, then the tensors in data order, each with dtype, shape, data_offsets.
Result<std::string> EncodeHeader(const std::vector<TensorData>& tensors,
                                 const std::map<std::string, std::string>& metadata) {
  std::set<std::string_view> names;
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) m[key] = value;
    header[std::string(kMetadataKey)] = std::move(m);
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorData& t = tensors[i];
    const std::string where = "tensor " + std::to_string(i) + " '" + t.name + "'";
    if (t.name.empty()) return InvalidArgumentError("tensor " + std::to_string(i) + " has an empty name");
    if (t.name == kMetadataKey) return InvalidArgumentError(where + ": the name is reserved for metadata");
    if (!names.insert(t.name).second) return InvalidArgumentError(where + ": duplicate name");
    const std::optional<size_t> size = SafetensorsDTypeSize(t.dtype);
    if (!size) return InvalidArgumentError(where + ": unknown dtype '" + t.dtype + "'");
    const std::optional<uint64_t> count = ElementCount(t.shape);
    uint64_t expected = 0;
    if (!count || __builtin_mul_overflow(*count, *size, &expected)) {
      return InvalidArgumentError(where + ": invalid shape " + CompactShapeText(t.shape));
    }
    if (expected != t.bytes) {
      return InvalidArgumentError(where + ": shape " + CompactShapeText(t.shape) + " of " + t.dtype + " is " +
                                  std::to_string(expected) + " bytes but " + std::to_string(t.bytes) +
                                  " bytes were given");
    }
    if (t.bytes > 0 && t.data == nullptr && !t.source) return InvalidArgumentError(where + ": null data");
    nlohmann::ordered_json info = nlohmann::ordered_json::object();
    info["dtype"] = t.dtype;
    info["shape"] = t.shape;
    info["data_offsets"] = nlohmann::ordered_json::array({offset, offset + t.bytes});
    header[t.name] = std::move(info);
    offset += t.bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // type_error 316: a string is not valid UTF-8
    return InvalidArgumentError(std::string("a tensor name or metadata entry is not valid UTF-8: ") + e.what());
  }
  text.append((kHeaderAlignment - text.size() % kHeaderAlignment) % kHeaderAlignment, ' ');
  return text;
}

// ---- Header validation (pure) -----------------------------------------------------------------

struct ParsedHeader {
  std::vector<SafetensorsTensor> tensors;  // sorted by data offset
  std::map<std::string, std::string> metadata;
};

Result<uint64_t> UnsignedField(const nlohmann::json& v, const std::string& where) {
  if (!v.is_number_unsigned()) return DataLossError(where + " is " + v.dump() + ", not a non-negative integer");
  return v.get<uint64_t>();
}

Result<SafetensorsTensor> ParseTensor(const std::string& name, const nlohmann::json& info) {
  const std::string where = "tensor '" + name + "'";
  if (!info.is_object()) return DataLossError(where + ": entry is " + std::string(info.type_name()) + ", not an object");
  for (const auto& [key, value] : info.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return DataLossError(where + ": unknown field '" + key + "'");
    }
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!info.contains(field)) return DataLossError(where + ": missing field '" + field + "'");
  }
  SafetensorsTensor t;
  t.name = name;
  const nlohmann::json& dtype = info["dtype"];
  if (!dtype.is_string()) return DataLossError(where + ": dtype is " + dtype.dump() + ", not a string");
  t.dtype = dtype.get<std::string>();
  const std::optional<size_t> size = SafetensorsDTypeSize(t.dtype);
  if (!size) return DataLossError(where + ": unknown dtype '" + t.dtype + "'");
  const nlohmann::json& shape = info["shape"];
  if (!shape.is_array()) return DataLossError(where + ": shape is " + shape.dump() + ", not an array");
  for (size_t i = 0; i < shape.size(); ++i) {
    DSLAUNCH_ASSIGN_OR_RETURN(uint64_t d, UnsignedField(shape[i], where + ": shape[" + std::to_string(i) + "]"));
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return DataLossError(where + ": shape[" + std::to_string(i) + "] = " + std::to_string(d) + " is too large");
    }
    t.shape.push_back(static_cast<int64_t>(d));
  }
  const nlohmann::json& offsets = info["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    return DataLossError(where + ": data_offsets is " + offsets.dump() + ", not an array [begin, end]");
  }
  DSLAUNCH_ASSIGN_OR_RETURN(t.begin, UnsignedField(offsets[0], where + ": data_offsets[0]"));
  DSLAUNCH_ASSIGN_OR_RETURN(t.end, UnsignedField(offsets[1], where + ": data_offsets[1]"));
  if (t.end < t.begin) return DataLossError(where + ": data_offsets " + Range(t.begin, t.end) + " end before they begin");
  const std::optional<uint64_t> count = ElementCount(t.shape);
  uint64_t expected = 0;
  if (!count || __builtin_mul_overflow(*count, *size, &expected)) {
    return DataLossError(where + ": shape " + CompactShapeText(t.shape) + " is too large");
  }
  if (expected != t.bytes()) {
    return DataLossError(where + ": shape " + CompactShapeText(t.shape) + " of " + t.dtype + " needs " +
                         std::to_string(expected) + " bytes but data_offsets " + Range(t.begin, t.end) + " hold " +
                         std::to_string(t.bytes()));
  }
  return t;
}

// Parses and validates `text` (the N header bytes) for a data section of `data_bytes` bytes.
// kDataLoss without the file name (the caller adds it).
Result<ParsedHeader> ParseHeader(std::string_view text, uint64_t data_bytes) {
  if (text.empty() || text.front() != '{') return DataLossError("header does not start with '{'");
  // Raw NUL is never valid JSON, but nlohmann's lexer takes it for the end of the input.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return DataLossError("header is not valid JSON: NUL byte at offset " + std::to_string(nul));
  }
  // nlohmann keeps the last of duplicate keys silently; the format forbids them, so find them.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto watch_keys = [&](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) open_objects.emplace_back();
    if (event == Event::object_end && !open_objects.empty()) open_objects.pop_back();
    if (event == Event::key && !open_objects.empty() && duplicate.empty() &&
        !open_objects.back().insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text.begin(), text.end(), watch_keys);
  } catch (const nlohmann::json::exception& e) {
    return DataLossError(std::string("header is not valid JSON: ") + e.what());
  }
  if (!duplicate.empty()) return DataLossError("header has the key '" + duplicate + "' twice");
  if (!header.is_object()) return DataLossError("header is not a JSON object");

  ParsedHeader out;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) return DataLossError("__metadata__ is " + std::string(value.type_name()) + ", not an object");
      for (const auto& [mkey, mvalue] : value.items()) {
        if (!mvalue.is_string()) {
          return DataLossError("__metadata__['" + mkey + "'] is " + mvalue.dump() + ", not a string");
        }
        out.metadata[mkey] = mvalue.get<std::string>();
      }
      continue;
    }
    DSLAUNCH_ASSIGN_OR_RETURN(SafetensorsTensor t, ParseTensor(key, value));
    out.tensors.push_back(std::move(t));
  }

  // The data section must be covered exactly: no tensor past its end, no overlap, no gap, and
  // nothing after the last tensor.
  auto& ts = out.tensors;
  std::sort(ts.begin(), ts.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  uint64_t covered = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const SafetensorsTensor& t = ts[i];
    if (t.end > data_bytes) {
      return DataLossError("tensor '" + t.name + "' data_offsets " + Range(t.begin, t.end) +
                           " run past the end of the data section (" + std::to_string(data_bytes) +
                           " bytes; truncated file?)");
    }
    if (t.begin < covered) {
      const SafetensorsTensor& prev = ts[i - 1];
      return DataLossError("tensor '" + t.name + "' data_offsets " + Range(t.begin, t.end) + " overlap tensor '" +
                           prev.name + "' " + Range(prev.begin, prev.end));
    }
    if (t.begin > covered) {
      return DataLossError("bytes " + Range(covered, t.begin) + " of the data section belong to no tensor");
    }
    covered = t.end;
  }
  if (covered != data_bytes) {
    return DataLossError("bytes " + Range(covered, data_bytes) + " at the end of the data section belong to no tensor");
  }
  return out;
}

// ---- File I/O ---------------------------------------------------------------------------------

// Appends to a file sequentially, gathering small pieces, and keeps the CRC-32C of everything.
class SequentialWriter {
 public:
  explicit SequentialWriter(WritableFile& file) : file_(file) {}

  Status Append(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    crc_ = Crc32c(p, n, crc_);
    bytes_ += n;
    if (n >= kDirectWriteBytes) {
      DSLAUNCH_RETURN_IF_ERROR(Flush());
      return file_.Append(p, n);
    }
    buffer_.insert(buffer_.end(), p, p + n);
    return buffer_.size() >= kIoChunkBytes ? Flush() : Status::Ok();
  }

  Status Flush() {
    Status s = file_.Append(buffer_.data(), buffer_.size());
    buffer_.clear();
    return s;
  }

  uint64_t bytes() const { return bytes_; }
  uint32_t crc() const { return crc_; }

 private:
  WritableFile& file_;
  std::vector<uint8_t> buffer_;
  uint64_t bytes_ = 0;
  uint32_t crc_ = 0;
};

Status PreadAll(int fd, void* out, uint64_t n, uint64_t offset, const std::string& path) {
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, std::min<uint64_t>(n, kIoChunkBytes), static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ErrnoError("read " + path, errno);
    if (r == 0) {
      return DataLossError(path + ": file ends at byte " + std::to_string(offset) + ", " + std::to_string(n) +
                           " bytes short (truncated?)");
    }
    p += r;
    n -= static_cast<uint64_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return Status::Ok();
}

Result<int> OpenForReading(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) return NotFoundError("safetensors file '" + path + "' does not exist");
    return ErrnoError("open " + path, e);
  }
  return fd;
}

Status WriteFile(WritableFile& file, const std::string& header, const std::vector<TensorData>& tensors, bool fsync,
                 WriteResult& result) {
  SequentialWriter out(file);
  uint8_t length[kLengthPrefixBytes];
  const uint64_t n = header.size();
  std::memcpy(length, &n, sizeof(length));  // little-endian (static_assert above)
  DSLAUNCH_RETURN_IF_ERROR(out.Append(length, sizeof(length)));
  DSLAUNCH_RETURN_IF_ERROR(out.Append(header.data(), header.size()));
  for (const TensorData& t : tensors) {
    if (t.data != nullptr || !t.source) {
      DSLAUNCH_RETURN_IF_ERROR(out.Append(t.data, t.bytes));
      continue;
    }
    uint64_t appended = 0;
    DSLAUNCH_RETURN_IF_ERROR(t.source([&](const void* data, size_t bytes) -> Status {
      if (appended + bytes > t.bytes) return InternalError("tensor '" + t.name + "': its source gave too many bytes");
      appended += bytes;
      return out.Append(data, bytes);
    }));
    if (appended != t.bytes) {
      return InternalError("tensor '" + t.name + "': its source gave " + std::to_string(appended) + " of " +
                           std::to_string(t.bytes) + " bytes");
    }
  }
  DSLAUNCH_RETURN_IF_ERROR(out.Flush());
  if (fsync) DSLAUNCH_RETURN_IF_ERROR(file.Sync());
  result.bytes = out.bytes();
  result.crc32c = out.crc();
  return Status::Ok();
}

}  // namespace

std::optional<size_t> SafetensorsDTypeSize(std::string_view dtype) {
  for (const DTypeEntry& e : kDTypes) {
    if (e.name == dtype) return e.size;
  }
  return std::nullopt;
}

std::string_view SafetensorsDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "F32";
    case DType::kFloat16: return "F16";
    case DType::kBFloat16: return "BF16";
    case DType::kInt64: return "I64";
    case DType::kUInt8: return "U8";
  }
  DSLAUNCH_CHECK(false) << "unknown DType " << static_cast<int>(dtype);
  return "";
}

Result<WriteResult> WriteSafetensors(const std::string& path, const std::vector<TensorData>& tensors,
                                     const std::map<std::string, std::string>& metadata,
                                     const WriteOptions& options) {
  auto header = EncodeHeader(tensors, metadata);
  if (!header.ok()) return header.status().WithContext(path);
  FileSystem& fs = options.file_system != nullptr ? *options.file_system : LocalFileSystem();
  const std::string file = options.atomic ? path + ".tmp" : path;
  DSLAUNCH_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> out, fs.NewWritableFile(file));
  WriteResult result;
  Status s = WriteFile(*out, *header, tensors, options.fsync, result);
  if (Status closed = out->Close(); s.ok()) s = closed;
  if (s.ok() && options.atomic) s = fs.Rename(file, path);
  if (!s.ok()) {
    fs.RemoveFile(file).IgnoreError();
    return s;
  }
  if (options.atomic && options.fsync) {
    std::string dir = std::filesystem::path(path).parent_path().string();
    DSLAUNCH_RETURN_IF_ERROR(fs.SyncDirectory(dir.empty() ? "." : dir));
  }
  return result;
}

// ---- SafetensorsFile --------------------------------------------------------------------------

Result<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  DSLAUNCH_ASSIGN_OR_RETURN(int fd, OpenForReading(path));
  SafetensorsFile file;  // owns fd from here on
  file.fd_ = fd;
  file.path_ = path;
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoError("stat " + path, errno);
  file.file_size_ = static_cast<uint64_t>(st.st_size);
  auto corrupt = [&](const std::string& what) { return DataLossError(path + ": " + what); };
  if (file.file_size_ < kLengthPrefixBytes) {
    return corrupt("file is " + std::to_string(file.file_size_) +
                   " bytes, too short for the 8-byte header length of a safetensors file");
  }
  uint64_t n = 0;
  DSLAUNCH_RETURN_IF_ERROR(PreadAll(fd, &n, sizeof(n), 0, path));
  if (n > kSafetensorsMaxHeaderBytes) {
    return corrupt("header length " + std::to_string(n) + " is above the limit of " +
                   std::to_string(kSafetensorsMaxHeaderBytes) + " bytes");
  }
  if (n > file.file_size_ - kLengthPrefixBytes) {
    return corrupt("header length " + std::to_string(n) + " runs past the end of the file (" +
                   std::to_string(file.file_size_) + " bytes; truncated?)");
  }
  std::string text(n, '\0');
  DSLAUNCH_RETURN_IF_ERROR(PreadAll(fd, text.data(), n, kLengthPrefixBytes, path));
  file.data_start_ = kLengthPrefixBytes + n;
  auto parsed = ParseHeader(text, file.file_size_ - file.data_start_);
  if (!parsed.ok()) return parsed.status().WithContext(path);
  file.tensors_ = std::move(parsed->tensors);
  file.metadata_ = std::move(parsed->metadata);
  for (size_t i = 0; i < file.tensors_.size(); ++i) file.index_.emplace(file.tensors_[i].name, i);
  return file;
}

Result<uint32_t> SafetensorsFile::FileCrc32c(const std::string& path) {
  DSLAUNCH_ASSIGN_OR_RETURN(int fd, OpenForReading(path));
  std::vector<uint8_t> buffer(kIoChunkBytes);
  uint32_t crc = 0;
  for (;;) {
    const ssize_t r = ::read(fd, buffer.data(), buffer.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int e = errno;
      ::close(fd);
      return ErrnoError("read " + path, e);
    }
    if (r == 0) break;
    crc = Crc32c(buffer.data(), static_cast<size_t>(r), crc);
  }
  ::close(fd);
  return crc;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      data_start_(other.data_start_),
      file_size_(other.file_size_),
      tensors_(std::move(other.tensors_)),
      index_(std::move(other.index_)),
      metadata_(std::move(other.metadata_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    data_start_ = other.data_start_;
    file_size_ = other.file_size_;
    tensors_ = std::move(other.tensors_);
    index_ = std::move(other.index_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

const SafetensorsTensor* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Status SafetensorsFile::Read(const SafetensorsTensor& t, uint64_t byte_offset, void* out, uint64_t bytes) const {
  DSLAUNCH_CHECK(fd_ >= 0) << "Read on a moved-from SafetensorsFile";
  if (t.end < t.begin || t.end > file_size_ - data_start_) {
    return InvalidArgumentError(path_ + ": tensor '" + t.name + "' " + Range(t.begin, t.end) +
                                " is not a tensor of this file");
  }
  if (byte_offset > t.bytes() || bytes > t.bytes() - byte_offset) {
    return InvalidArgumentError(path_ + ": bytes " + Range(byte_offset, byte_offset + bytes) +
                                " are outside tensor '" + t.name + "' (" + std::to_string(t.bytes()) + " bytes)");
  }
  return PreadAll(fd_, out, bytes, data_start_ + t.begin + byte_offset, path_);
}

}  // namespace dslaunch::runtime
