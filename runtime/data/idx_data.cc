#include "runtime/data/idx_data.h"

#include <cstdio>

#include "common/check.h"
#include "common/file_io.h"

namespace dslaunch::runtime {
namespace {

constexpr size_t kMagicBytes = 4;
constexpr size_t kDimBytes = 4;

uint32_t LoadBigEndian32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | uint32_t{u[3]};
}

void AppendBigEndian32(std::string& out, uint32_t v) {
  out.push_back(static_cast<char>(v >> 24));
  out.push_back(static_cast<char>(v >> 16));
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v));
}

std::string Hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

// What a magic that is not the expected one probably is, for the error message.
std::string DescribeMagic(std::string_view bytes) {
  // gzip's magic: the published MNIST files are .gz.
  constexpr unsigned char kGzip0 = 0x1f, kGzip1 = 0x8b;
  if (bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == kGzip0 &&
      static_cast<unsigned char>(bytes[1]) == kGzip1) {
    return " (gzip-compressed: gunzip it first)";
  }
  const uint32_t magic = LoadBigEndian32(bytes.data());
  if (magic == kIdxImagesMagic) return " (an IDX images file)";
  if (magic == kIdxLabelsMagic) return " (an IDX labels file)";
  if ((magic >> 16) == 0) {
    char type[8];
    std::snprintf(type, sizeof(type), "0x%02x", (magic >> 8) & 0xff);
    return std::string(" (IDX data type ") + type + " with " + std::to_string(magic & 0xff) +
           " dimensions; only unsigned bytes (0x08) are read)";
  }
  return " (not an IDX file)";
}

// Checks the magic and the dimension sizes of an IDX file of `dims` dimensions, and that the body
// has exactly the bytes they declare. Fills sizes[dims]; returns the body's offset.
Result<size_t> ParseIdxHeader(std::string_view bytes, std::string_view path, uint32_t expected_magic,
                              const char* kind, int dims, uint32_t* sizes) {
  const std::string where(path);
  if (bytes.size() < kMagicBytes) {
    return InvalidArgumentError(where + ": " + std::to_string(bytes.size()) +
                                " bytes is shorter than the 4-byte magic of an IDX " + kind + " file");
  }
  const uint32_t magic = LoadBigEndian32(bytes.data());
  if (magic != expected_magic) {
    return InvalidArgumentError(where + ": magic " + Hex32(magic) + DescribeMagic(bytes) + " is not " +
                                Hex32(expected_magic) + " (IDX " + kind + ")");
  }
  const size_t header = kMagicBytes + kDimBytes * static_cast<size_t>(dims);
  if (bytes.size() < header) {
    return InvalidArgumentError(where + ": truncated header: " + std::to_string(bytes.size()) +
                                " bytes, the header of an IDX " + kind + " file is " + std::to_string(header));
  }
  uint64_t body = 1;
  std::string shape;
  for (int d = 0; d < dims; ++d) {
    sizes[d] = LoadBigEndian32(bytes.data() + kMagicBytes + kDimBytes * d);
    shape += (d > 0 ? " x " : "") + std::to_string(sizes[d]);
  }
  for (int d = 0; d < dims; ++d) {
    // body <= kIdxMaxBytes < 2^31 and sizes[d] < 2^32: the product cannot wrap a uint64.
    body *= sizes[d];
    if (body > kIdxMaxBytes) {
      return InvalidArgumentError(where + ": dimensions " + shape + " overflow: more than " +
                                  std::to_string(kIdxMaxBytes) + " bytes of data (corrupt header?)");
    }
  }
  if (bytes.size() != header + body) {
    const bool short_file = bytes.size() < header + body;
    return InvalidArgumentError(where + ": dimensions " + shape + " need " + std::to_string(header + body) +
                                " bytes but the file has " + std::to_string(bytes.size()) +
                                (short_file ? " (truncated)" : " (trailing bytes)"));
  }
  return header;
}

}  // namespace

std::string EncodeIdxImages(const IdxImages& images) {
  const size_t count = static_cast<size_t>(images.n) * images.rows * images.cols;
  DSLAUNCH_CHECK(images.pixels.size() == count)
      << images.pixels.size() << " pixels for " << images.n << " x " << images.rows << " x " << images.cols;
  std::string out;
  out.reserve(kMagicBytes + 3 * kDimBytes + count);
  AppendBigEndian32(out, kIdxImagesMagic);
  AppendBigEndian32(out, static_cast<uint32_t>(images.n));
  AppendBigEndian32(out, static_cast<uint32_t>(images.rows));
  AppendBigEndian32(out, static_cast<uint32_t>(images.cols));
  out.append(reinterpret_cast<const char*>(images.pixels.data()), count);
  return out;
}

std::string EncodeIdxLabels(std::span<const uint8_t> labels) {
  std::string out;
  out.reserve(kMagicBytes + kDimBytes + labels.size());
  AppendBigEndian32(out, kIdxLabelsMagic);
  AppendBigEndian32(out, static_cast<uint32_t>(labels.size()));
  out.append(reinterpret_cast<const char*>(labels.data()), labels.size());
  return out;
}

Result<IdxImages> DecodeIdxImages(std::string_view bytes, std::string_view path) {
  uint32_t sizes[3];
  DSLAUNCH_ASSIGN_OR_RETURN(size_t offset, ParseIdxHeader(bytes, path, kIdxImagesMagic, "images", 3, sizes));
  if (sizes[1] == 0 || sizes[2] == 0) {
    return InvalidArgumentError(std::string(path) + ": images of " + std::to_string(sizes[1]) + " x " +
                                std::to_string(sizes[2]) + " pixels");
  }
  // Each size is at most kIdxMaxBytes (their product is), so each fits in an int.
  IdxImages images;
  images.n = static_cast<int>(sizes[0]);
  images.rows = static_cast<int>(sizes[1]);
  images.cols = static_cast<int>(sizes[2]);
  images.pixels.assign(bytes.begin() + offset, bytes.end());
  return images;
}

Result<std::vector<uint8_t>> DecodeIdxLabels(std::string_view bytes, std::string_view path) {
  uint32_t size;
  DSLAUNCH_ASSIGN_OR_RETURN(size_t offset, ParseIdxHeader(bytes, path, kIdxLabelsMagic, "labels", 1, &size));
  return std::vector<uint8_t>(bytes.begin() + offset, bytes.end());
}

Result<IdxImages> ReadIdxImages(const std::string& path) {
  DSLAUNCH_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  return DecodeIdxImages(bytes, path);
}

Result<std::vector<uint8_t>> ReadIdxLabels(const std::string& path) {
  DSLAUNCH_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  return DecodeIdxLabels(bytes, path);
}

Result<IdxDataset> ReadIdxDataset(const std::string& images_path, const std::string& labels_path) {
  IdxDataset data;
  DSLAUNCH_ASSIGN_OR_RETURN(data.images, ReadIdxImages(images_path));
  DSLAUNCH_ASSIGN_OR_RETURN(data.labels, ReadIdxLabels(labels_path));
  if (data.labels.size() != static_cast<size_t>(data.images.n)) {
    return InvalidArgumentError(images_path + " holds " + std::to_string(data.images.n) + " images but " +
                                labels_path + " holds " + std::to_string(data.labels.size()) + " labels");
  }
  if (data.images.n == 0) {
    return InvalidArgumentError(images_path + " and " + labels_path + " hold no samples");
  }
  return data;
}

Status CheckIdxDatasetFits(const IdxDataset& data, int input_width, int classes, std::string_view what) {
  const std::string where(what);
  if (data.images.pixels_per_image() != input_width) {
    return InvalidArgumentError(where + ": images of " + std::to_string(data.images.rows) + " x " +
                                std::to_string(data.images.cols) + " = " +
                                std::to_string(data.images.pixels_per_image()) + " pixels, but the model's input is " +
                                std::to_string(input_width) + " wide");
  }
  for (size_t i = 0; i < data.labels.size(); ++i) {
    if (data.labels[i] >= classes) {
      return InvalidArgumentError(where + ": label " + std::to_string(data.labels[i]) + " of sample " +
                                  std::to_string(i) + " is not below the model's " + std::to_string(classes) +
                                  " classes");
    }
  }
  return Status::Ok();
}

void GatherIdxBatch(const IdxDataset& data, std::span<const int64_t> indices, float* inputs, int* labels) {
  const size_t pixels = static_cast<size_t>(data.images.pixels_per_image());
  for (size_t r = 0; r < indices.size(); ++r) {
    const int64_t i = indices[r];
    DSLAUNCH_CHECK(i >= 0 && i < data.images.n) << "sample " << i << " outside [0, " << data.images.n << ")";
    const uint8_t* src = data.images.pixels.data() + static_cast<size_t>(i) * pixels;
    float* dst = inputs + r * pixels;
    for (size_t k = 0; k < pixels; ++k) dst[k] = static_cast<float>(src[k]) * kIdxPixelScale;
    labels[r] = data.labels[static_cast<size_t>(i)];
  }
}

Status WriteIdxImages(const std::string& path, const IdxImages& images) {
  return WriteFileAtomically(path, EncodeIdxImages(images));
}

Status WriteIdxLabels(const std::string& path, std::span<const uint8_t> labels) {
  return WriteFileAtomically(path, EncodeIdxLabels(labels));
}

}  // namespace dslaunch::runtime
