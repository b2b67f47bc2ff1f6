// IDX files, the format of MNIST and FashionMNIST (docs/data.md): a big-endian uint32 magic
// 0x000008DD (0x08: unsigned bytes, DD: the number of dimensions), DD big-endian uint32 dimension
// sizes, then the product of the sizes in bytes, row-major. Two kinds are read and written:
//   images  magic 0x00000803, dimensions [n][rows][cols], one byte per pixel (0 background, 255 ink);
//   labels  magic 0x00000801, dimension [n], one class index per byte.
// Files must be uncompressed (the published ones are gzip'd: gunzip them first).
//
// Decoding and encoding are pure; Read*/Write* do the file I/O (writes are atomic: temporary file,
// fsync, rename). Pixels are kept as the bytes of the file; GatherIdxBatch scales them to [0, 1]
// for the model. Errors are kInvalidArgument (the file is not what the config says it is:
// bad magic, truncated, trailing bytes, absurd dimensions, images and labels that do not pair up)
// or kNotFound (cannot open), and name the file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dslaunch::runtime {

inline constexpr uint32_t kIdxImagesMagic = 0x00000803;
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;
// Pixel byte -> model input: x = byte / 255, in [0, 1] as torchvision's ToTensor.
inline constexpr float kIdxPixelScale = 1.0f / 255.0f;

struct IdxImages {
  int n = 0;
  int rows = 0;
  int cols = 0;
  std::vector<uint8_t> pixels;  // [n][rows][cols], row-major
  int pixels_per_image() const { return rows * cols; }
};

// Images and their labels, one label per image.
struct IdxDataset {
  IdxImages images;
  std::vector<uint8_t> labels;  // [images.n]
};

// The bytes of an IDX images / labels file. Precondition: pixels.size() == n * rows * cols.
std::string EncodeIdxImages(const IdxImages& images);
std::string EncodeIdxLabels(std::span<const uint8_t> labels);

// Parses a whole file's bytes; `path` names it in errors. kInvalidArgument for a bad magic (with
// the value found and the one expected), a header or body shorter or longer than the dimensions
// say (with both byte counts), zero rows or columns, or dimensions whose product does not fit in
// memory (more than kIdxMaxBytes).
Result<IdxImages> DecodeIdxImages(std::string_view bytes, std::string_view path);
Result<std::vector<uint8_t>> DecodeIdxLabels(std::string_view bytes, std::string_view path);

// The largest body an IDX file may declare: 2^31 - 1 bytes, so that every count and offset fits
// in an int (FashionMNIST's training images are 47 MB).
inline constexpr uint64_t kIdxMaxBytes = 0x7fffffff;

// Read a file and decode it (kNotFound when it cannot be opened).
Result<IdxImages> ReadIdxImages(const std::string& path);
Result<std::vector<uint8_t>> ReadIdxLabels(const std::string& path);

// Reads both files and checks that they pair up: as many labels as images, and at least one.
// Errors name both files.
Result<IdxDataset> ReadIdxDataset(const std::string& images_path, const std::string& labels_path);

// kInvalidArgument, prefixed with `what` (e.g. "data.train"), when the dataset does not fit a
// classifier with `input_width` inputs and `classes` outputs: pixels per image != input_width,
// or a label >= classes (the first such label and its index are named).
Status CheckIdxDatasetFits(const IdxDataset& data, int input_width, int classes, std::string_view what);

// Copies the images and labels of the samples `indices` (each in [0, n)) into
// inputs[indices.size()][pixels_per_image()], scaled by kIdxPixelScale, and labels[indices.size()].
void GatherIdxBatch(const IdxDataset& data, std::span<const int64_t> indices, float* inputs, int* labels);

// Atomic writes of EncodeIdxImages / EncodeIdxLabels.
Status WriteIdxImages(const std::string& path, const IdxImages& images);
Status WriteIdxLabels(const std::string& path, std::span<const uint8_t> labels);

}  // namespace dslaunch::runtime
