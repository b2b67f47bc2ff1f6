#include "runtime/data/idx_data.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/support/subprocess.h"

namespace dslaunch::runtime {
namespace {

IdxImages SmallImages() {
  IdxImages images;
  images.n = 3;
  images.rows = 2;
  images.cols = 4;
  for (int i = 0; i < 3 * 2 * 4; ++i) images.pixels.push_back(static_cast<uint8_t>(i * 11));
  return images;
}

bool Contains(const Status& s, const std::string& part) { return s.message().find(part) != std::string::npos; }

TEST_CASE("IDX files have a big-endian magic and sizes and round-trip") {
  const IdxImages images = SmallImages();
  const std::string bytes = EncodeIdxImages(images);
  REQUIRE(bytes.size() == 16 + 24);
  CHECK(bytes.substr(0, 16) == std::string("\0\0\x08\x03\0\0\0\x03\0\0\0\x02\0\0\0\x04", 16));
  auto back = DecodeIdxImages(bytes, "img");
  REQUIRE(back.ok());
  CHECK(back->n == 3);
  CHECK(back->rows == 2);
  CHECK(back->cols == 4);
  CHECK(back->pixels == images.pixels);

  const std::vector<uint8_t> labels = {9, 0, 7};
  const std::string label_bytes = EncodeIdxLabels(labels);
  CHECK(label_bytes == std::string("\0\0\x08\x01\0\0\0\x03\x09\x00\x07", 11));
  auto labels_back = DecodeIdxLabels(label_bytes, "lbl");
  REQUIRE(labels_back.ok());
  CHECK(*labels_back == labels);
}

TEST_CASE("IDX files are written atomically and read back as a dataset") {
  testing::TempDir dir;
  const std::string img = dir.path() + "/train-images-idx3-ubyte", lbl = dir.path() + "/train-labels-idx1-ubyte";
  REQUIRE(WriteIdxImages(img, SmallImages()).ok());
  REQUIRE(WriteIdxLabels(lbl, std::vector<uint8_t>{1, 2, 0}).ok());
  auto data = ReadIdxDataset(img, lbl);
  REQUIRE(data.ok());
  CHECK(data->images.pixels == SmallImages().pixels);
  CHECK(data->labels == std::vector<uint8_t>{1, 2, 0});

  CHECK(CheckIdxDatasetFits(*data, 8, 3, "data.train").ok());
  Status wide = CheckIdxDatasetFits(*data, 784, 3, "data.train");
  CHECK(wide.code() == StatusCode::kInvalidArgument);
  CHECK(wide.message() == "data.train: images of 2 x 4 = 8 pixels, but the model's input is 784 wide");
  Status classes = CheckIdxDatasetFits(*data, 8, 2, "data.train");
  CHECK(classes.message() == "data.train: label 2 of sample 1 is not below the model's 2 classes");

  // Rows 2 and 0, scaled to [0, 1].
  std::vector<float> inputs(2 * 8);
  std::vector<int> batch_labels(2);
  const std::vector<int64_t> indices = {2, 0};
  GatherIdxBatch(*data, indices, inputs.data(), batch_labels.data());
  CHECK(batch_labels == std::vector<int>{0, 1});
  CHECK(inputs[0] == doctest::Approx(16 * 11 / 255.0));
  CHECK(inputs[8] == 0.0f);
  CHECK(inputs[15] == doctest::Approx(7 * 11 / 255.0));
}

TEST_CASE("Reading a missing IDX file is not found, naming it") {
  testing::TempDir dir;
  auto r = ReadIdxImages(dir.path() + "/nope");
  CHECK(r.status().code() == StatusCode::kNotFound);
  CHECK(Contains(r.status(), dir.path() + "/nope"));
  CHECK(ReadIdxLabels(dir.path() + "/nope").status().code() == StatusCode::kNotFound);
}

TEST_CASE("A bad IDX magic is reported with the value found and the one expected") {
  const std::string labels = EncodeIdxLabels(std::vector<uint8_t>{1});
  const std::string images = EncodeIdxImages(SmallImages());
  struct Case {
    std::string bytes;
    std::string message;
  };
  const std::vector<Case> image_cases = {
      {labels, "f: magic 0x00000801 (an IDX labels file) is not 0x00000803 (IDX images)"},
      {std::string("\x1f\x8b\x08\x08rest", 8),
       "f: magic 0x1f8b0808 (gzip-compressed: gunzip it first) is not 0x00000803 (IDX images)"},
      {std::string("\0\0\x0d\x03", 4) + images.substr(4),
       "f: magic 0x00000d03 (IDX data type 0x0d with 3 dimensions; only unsigned bytes (0x08) are read) is not "
       "0x00000803 (IDX images)"},
      {std::string("P5\n28 28\n255\n"), "f: magic 0x50350a32 (not an IDX file) is not 0x00000803 (IDX images)"},
      {std::string("\0\0", 2), "f: 2 bytes is shorter than the 4-byte magic of an IDX images file"},
  };
  for (const auto& c : image_cases) {
    CAPTURE(c.message);
    auto r = DecodeIdxImages(c.bytes, "f");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message() == c.message);
  }
  auto r = DecodeIdxLabels(images, "lbl");
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message() == "lbl: magic 0x00000803 (an IDX images file) is not 0x00000801 (IDX labels)");
}

TEST_CASE("A truncated or padded IDX file is reported with both byte counts") {
  const std::string images = EncodeIdxImages(SmallImages());  // 40 bytes
  const std::string labels = EncodeIdxLabels(std::vector<uint8_t>{1, 2, 3});  // 11 bytes
  struct Case {
    std::string bytes;
    bool is_images;
    std::string message;
  };
  const std::vector<Case> cases = {
      {images.substr(0, 39), true, "f: dimensions 3 x 2 x 4 need 40 bytes but the file has 39 (truncated)"},
      {images + "x", true, "f: dimensions 3 x 2 x 4 need 40 bytes but the file has 41 (trailing bytes)"},
      {images.substr(0, 10), true, "f: truncated header: 10 bytes, the header of an IDX images file is 16"},
      {labels.substr(0, 9), false, "f: dimensions 3 need 11 bytes but the file has 9 (truncated)"},
      {labels.substr(0, 6), false, "f: truncated header: 6 bytes, the header of an IDX labels file is 8"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.message);
    Status s = c.is_images ? DecodeIdxImages(c.bytes, "f").status() : DecodeIdxLabels(c.bytes, "f").status();
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK(s.message() == c.message);
  }
}

TEST_CASE("IDX dimensions whose product overflows, or empty images, are rejected") {
  // 0xffffffff x 0xffffffff x 0xffffffff would wrap a 64-bit product.
  const std::string huge = std::string("\0\0\x08\x03", 4) + std::string(12, '\xff');
  auto r = DecodeIdxImages(huge, "f");
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message() ==
        "f: dimensions 4294967295 x 4294967295 x 4294967295 overflow: more than 2147483647 bytes of data "
        "(corrupt header?)");
  // 65536 x 65536 x 1 = 2^32: fits in 64 bits but not the limit.
  const std::string big = std::string("\0\0\x08\x03\0\x01\0\0\0\x01\0\0\0\0\0\x01", 16);
  CHECK(Contains(DecodeIdxImages(big, "f").status(), "dimensions 65536 x 65536 x 1 overflow"));
  const std::string no_cols = std::string("\0\0\x08\x03\0\0\0\x02\0\0\0\x1c\0\0\0\0", 16);
  CHECK(DecodeIdxImages(no_cols, "f").status().message() == "f: images of 28 x 0 pixels");
  // No images at all is a valid file.
  const std::string none = std::string("\0\0\x08\x03\0\0\0\0\0\0\0\x1c\0\0\0\x1c", 16);
  auto empty = DecodeIdxImages(none, "f");
  REQUIRE(empty.ok());
  CHECK(empty->n == 0);
}

TEST_CASE("ReadIdxDataset names both files when the counts differ, and rejects an empty set") {
  testing::TempDir dir;
  const std::string img = dir.path() + "/img", lbl = dir.path() + "/lbl";
  REQUIRE(WriteIdxImages(img, SmallImages()).ok());
  REQUIRE(WriteIdxLabels(lbl, std::vector<uint8_t>{1, 2}).ok());
  auto r = ReadIdxDataset(img, lbl);
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message() == img + " holds 3 images but " + lbl + " holds 2 labels");

  CHECK(ReadIdxDataset(dir.path() + "/missing", lbl).status().code() == StatusCode::kNotFound);
  REQUIRE(WriteIdxLabels(img, std::vector<uint8_t>{1, 2}).ok());  // a labels file where images belong
  CHECK(Contains(ReadIdxDataset(img, lbl).status(), img + ": magic 0x00000801"));

  IdxImages none;
  none.rows = none.cols = 28;
  REQUIRE(WriteIdxImages(img, none).ok());
  REQUIRE(WriteIdxLabels(lbl, std::vector<uint8_t>{}).ok());
  CHECK(ReadIdxDataset(img, lbl).status().message() == img + " and " + lbl + " hold no samples");
}

}  // namespace
}  // namespace dslaunch::runtime
