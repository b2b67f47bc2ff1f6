#include "runtime/engine/scratch_buffers.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

namespace dslaunch::runtime {
namespace {

bool AllZero(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return x == 0.0f; });
}

TEST_CASE("A scratch buffer given back for reuse is taken again for the same size, zeroed again") {
  ScratchBuffers scratch;
  std::vector<float> a = scratch.Take(1000);
  CHECK(a.size() == 1000);
  CHECK(AllZero(a));
  std::fill(a.begin(), a.end(), 7.0f);
  const float* memory = a.data();
  scratch.GiveForReuse(std::move(a));
  CHECK(a.empty());
  CHECK(scratch.kept_bytes() == 4000);

  std::vector<float> b = scratch.Take(1000);
  CHECK(b.data() == memory);  // the same allocation, not a fresh one
  CHECK(AllZero(b));
  CHECK(scratch.kept_bytes() == 0);
  CHECK(scratch.peak() == 4000);

  // Another size is a fresh buffer.
  std::vector<float> c = scratch.Take(10);
  CHECK(c.data() != memory);
  CHECK(scratch.peak() == 4040);
  scratch.GiveForReuse(std::move(b));
  scratch.GiveForReuse(std::move(c));
  CHECK(scratch.kept_bytes() == 4040);
  scratch.Trim();
  CHECK(scratch.kept_bytes() == 0);
  CHECK(scratch.peak() == 4040);  // the mark stays
}

TEST_CASE("Kept scratch buffers and those out never exceed the high-water mark together") {
  ScratchBuffers scratch;
  std::vector<float> small = scratch.Take(100);
  std::vector<float> large = scratch.Take(300);
  CHECK(scratch.peak() == 1600);
  scratch.GiveForReuse(std::move(small));
  scratch.GiveForReuse(std::move(large));
  CHECK(scratch.kept_bytes() == 1600);

  // 200 floats fresh: 800 bytes out; the larger kept buffer goes so that 400 + 800 <= 1600.
  std::vector<float> mid = scratch.Take(200);
  CHECK(scratch.peak() == 1600);
  CHECK(scratch.kept_bytes() == 400);
  // The small one is still kept and comes back.
  std::vector<float> again = scratch.Take(100);
  CHECK(scratch.kept_bytes() == 0);

  // A fresh buffer that raises the mark: 400 kept + 800 + 4000 out would pass it.
  scratch.GiveForReuse(std::move(again));
  std::vector<float> big = scratch.Take(1000);
  CHECK(scratch.peak() == 4800);
  CHECK(scratch.kept_bytes() == 0);
  scratch.GiveForReuse(std::move(mid));
  scratch.GiveForReuse(std::move(big));
  scratch.GiveForReuse(std::vector<float>());  // an empty one is fine and kept as nothing
  CHECK(scratch.kept_bytes() == 4800);
}

TEST_CASE("A scratch buffer given back with Give is freed, not kept") {
  ScratchBuffers scratch;
  std::vector<float> a = scratch.Take(1000);
  scratch.Give(std::move(a));
  CHECK(a.empty());
  CHECK(scratch.kept_bytes() == 0);
  CHECK(scratch.peak() == 4000);
}

}  // namespace
}  // namespace dslaunch::runtime
