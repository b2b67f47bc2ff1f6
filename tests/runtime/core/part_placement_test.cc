// A model part's place in the whole model (runtime/core/part_placement.h): pieces cut to a range,
// merged, and ranges without the ones another rank saves; checked element by element against the
// pieces expanded by hand.
#include "runtime/core/part_placement.h"

#include <doctest/doctest.h>

#include <vector>

namespace dslaunch::runtime {
namespace {

// Every whole-model index the pieces name, in order.
std::vector<uint64_t> Expand(const std::vector<WholePiece>& pieces) {
  std::vector<uint64_t> out;
  ForEachRun(pieces, [&](uint64_t begin, uint64_t count) {
    for (uint64_t i = 0; i < count; ++i) out.push_back(begin + i);
  });
  return out;
}

TEST_CASE("AppendPiece merges a run right after a single run, and runs one stride apart") {
  std::vector<WholePiece> p;
  AppendPiece(p, {10, 0, 4, 1});
  AppendPiece(p, {14, 0, 2, 1});
  CHECK(p == std::vector<WholePiece>{{10, 0, 6, 1}});
  // Another of 6 elements 20 further: a strided piece of two runs, then a third.
  AppendPiece(p, {30, 0, 6, 1});
  AppendPiece(p, {50, 0, 6, 1});
  CHECK(p == std::vector<WholePiece>{{10, 20, 6, 3}});
  // A strided piece of the same stride continues it; one of another stride does not, even where
  // its first run would continue it.
  AppendPiece(p, {70, 20, 6, 2});
  CHECK(p == std::vector<WholePiece>{{10, 20, 6, 5}});
  AppendPiece(p, {110, 30, 6, 2});
  CHECK(p.size() == 2);
  // Nothing is merged backwards, nor a run of another length, nor an empty piece kept.
  AppendPiece(p, {0, 0, 6, 1});
  AppendPiece(p, {7, 0, 3, 1});
  AppendPiece(p, {500, 0, 0, 1});
  CHECK(p.size() == 4);
  CHECK(p[3] == WholePiece{7, 0, 3, 1});
}

TEST_CASE("PiecesOf cuts a strided piece into a partial run, whole runs and a partial run") {
  // A column slice: 4 rows of 3 elements of a [4][10] tensor at 100, columns 2-4; then a
  // contiguous tensor of 5 at 200.
  const std::vector<WholePiece> pieces = {{102, 10, 3, 4}, {200, 0, 5, 1}};
  std::vector<uint64_t> all = Expand(pieces);
  REQUIRE(all.size() == 17);
  CHECK(all[0] == 102);
  CHECK(all[3] == 112);
  CHECK(all[12] == 200);
  for (size_t b = 0; b <= all.size(); ++b) {
    for (size_t e = b; e <= all.size(); ++e) {
      CAPTURE(b);
      CAPTURE(e);
      const std::vector<WholePiece> cut = PiecesOf(pieces, {b, e});
      CHECK(Expand(cut) == std::vector<uint64_t>(all.begin() + b, all.begin() + e));
      CHECK(cut.size() <= 4);  // at most 3 from the strided piece and 1 from the other
    }
  }
  CHECK(PiecesOf(pieces, {1, 11}) == std::vector<WholePiece>{{103, 0, 2, 1}, {112, 10, 3, 2}, {132, 0, 2, 1}});
  // The whole of a contiguous layout is one piece.
  CHECK(PiecesOf({{0, 0, 7, 1}}, {0, 7}) == std::vector<WholePiece>{{0, 0, 7, 1}});
}

TEST_CASE("Without leaves out the ranges another rank saves") {
  const std::vector<ShardRange> skip = {{2, 4}, {6, 7}, {9, 12}};
  CHECK(Without({0, 10}, skip) == std::vector<ShardRange>{{0, 2}, {4, 6}, {7, 9}});
  CHECK(Without({3, 8}, skip) == std::vector<ShardRange>{{4, 6}, {7, 8}});
  CHECK(Without({9, 11}, skip).empty());
  CHECK(Without({12, 15}, skip) == std::vector<ShardRange>{{12, 15}});
  CHECK(Without({0, 5}, {}) == std::vector<ShardRange>{{0, 5}});
  CHECK(Without({4, 4}, {}).empty());
}

}  // namespace
}  // namespace dslaunch::runtime
