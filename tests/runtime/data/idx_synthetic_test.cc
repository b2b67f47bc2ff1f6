#include "runtime/data/idx_synthetic.h"

#include <doctest/doctest.h>

#include <array>
#include <vector>

namespace dslaunch::runtime {
namespace {

TEST_CASE("Synthetic digits are 28x28, balanced over 10 classes, and deterministic per seed") {
  const IdxDataset a = MakeSyntheticDigits(1003, 5);
  CHECK(a.images.n == 1003);
  CHECK(a.images.rows == 28);
  CHECK(a.images.cols == 28);
  REQUIRE(a.images.pixels.size() == 1003u * 784);
  REQUIRE(a.labels.size() == 1003);
  std::array<int, 10> counts{};
  for (uint8_t l : a.labels) {
    REQUIRE(l < 10);
    ++counts[l];
  }
  for (int c = 0; c < 10; ++c) {
    CAPTURE(c);
    CHECK(counts[c] == (c < 3 ? 101 : 100));
  }

  const IdxDataset again = MakeSyntheticDigits(1003, 5);
  CHECK(again.images.pixels == a.images.pixels);
  CHECK(again.labels == a.labels);
  const IdxDataset other = MakeSyntheticDigits(1003, 6);
  CHECK(other.images.pixels != a.images.pixels);
  // A prefix of a larger set.
  const IdxDataset prefix = MakeSyntheticDigits(10, 5);
  CHECK(std::vector<uint8_t>(a.images.pixels.begin(), a.images.pixels.begin() + 10 * 784) == prefix.images.pixels);
  CHECK(MakeSyntheticDigits(0, 5).images.pixels.empty());
}

TEST_CASE("Synthetic digits have ink on a dark background and differ within a class") {
  const IdxDataset d = MakeSyntheticDigits(200, 1);
  for (int i = 0; i < d.images.n; ++i) {
    CAPTURE(i);
    const uint8_t* img = d.images.pixels.data() + static_cast<size_t>(i) * 784;
    int ink = 0, dark = 0;
    for (int k = 0; k < 784; ++k) {
      if (img[k] >= 128) ++ink;
      if (img[k] <= 25) ++dark;
    }
    // Even a "1" (two short segments) covers a few dozen pixels; an "8" leaves most of the image dark.
    CHECK(ink >= 15);
    CHECK(dark >= 784 / 2);
  }
  // Two images of the same class are not the same image.
  CHECK(std::vector<uint8_t>(d.images.pixels.begin(), d.images.pixels.begin() + 784) !=
        std::vector<uint8_t>(d.images.pixels.begin() + 10 * 784, d.images.pixels.begin() + 11 * 784));
}

}  // namespace
}  // namespace dslaunch::runtime
