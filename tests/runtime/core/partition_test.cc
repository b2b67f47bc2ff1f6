// ShardFor's properties over many (numel, world) pairs, and parameter/shard intersections
// (docs/numerics.md, "Partitioning").
#include "runtime/core/partition.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace dslaunch::runtime {
namespace {

std::vector<size_t> Numels() {
  std::vector<size_t> numels;
  for (size_t n = 0; n <= 70; ++n) numels.push_back(n);
  for (size_t n : {127u, 128u, 129u, 1000u, 1023u, 4097u, 65537u, 1000003u}) numels.push_back(n);
  return numels;
}

TEST_CASE("ShardFor shards are ordered, disjoint, covering and balanced within one") {
  for (size_t numel : Numels()) {
    for (int world : {1, 2, 3, 4, 5, 7, 8, 16, 64, 100}) {
      CAPTURE(numel);
      CAPTURE(world);
      size_t expected_begin = 0;
      size_t smallest = numel;
      size_t largest = 0;
      const std::vector<size_t> counts = ShardCounts(numel, world);
      REQUIRE(counts.size() == static_cast<size_t>(world));
      for (int rank = 0; rank < world; ++rank) {
        const ShardRange shard = ShardFor(numel, world, rank);
        CHECK(shard.begin == expected_begin);  // ordered and contiguous: no gap, no overlap
        CHECK(shard.end >= shard.begin);
        CHECK(counts[static_cast<size_t>(rank)] == shard.size());
        smallest = std::min(smallest, shard.size());
        largest = std::max(largest, shard.size());
        expected_begin = shard.end;
      }
      CHECK(expected_begin == numel);  // covering
      CHECK(largest - smallest <= 1);  // balanced
      CHECK(MaxShardSize(numel, world) == largest);
      CHECK(std::accumulate(counts.begin(), counts.end(), size_t{0}) == numel);
    }
  }
}

TEST_CASE("ShardFor gives the remainder to the first ranks") {
  // 10 over 4: q = 2, r = 2 -> 3, 3, 2, 2.
  CHECK(ShardFor(10, 4, 0) == ShardRange{0, 3});
  CHECK(ShardFor(10, 4, 1) == ShardRange{3, 6});
  CHECK(ShardFor(10, 4, 2) == ShardRange{6, 8});
  CHECK(ShardFor(10, 4, 3) == ShardRange{8, 10});
  // Fewer elements than ranks: the last ranks own nothing.
  CHECK(ShardCounts(2, 4) == std::vector<size_t>{1, 1, 0, 0});
  CHECK(ShardFor(2, 4, 3).empty());
  CHECK(MaxShardSize(0, 3) == 0);
}

TEST_CASE("OwnerOf agrees with ShardFor for every index") {
  for (size_t numel : {1u, 2u, 5u, 10u, 17u, 64u, 99u}) {
    for (int world : {1, 2, 3, 4, 7, 16}) {
      CAPTURE(numel);
      CAPTURE(world);
      for (size_t i = 0; i < numel; ++i) {
        const int owner = OwnerOf(i, numel, world);
        REQUIRE(owner >= 0);
        REQUIRE(owner < world);
        CHECK(ShardFor(numel, world, owner).Contains(i));
      }
    }
  }
}

TEST_CASE("IntersectParam returns the owned slice of a parameter") {
  // Parameter at [10, 20).
  CHECK(IntersectParam(10, 10, {15, 30}) == ParamSlice{5, 0, 5});    // tail of the parameter
  CHECK(IntersectParam(10, 10, {0, 12}) == ParamSlice{0, 10, 2});    // head of the parameter
  CHECK(IntersectParam(10, 10, {12, 14}) == ParamSlice{2, 0, 2});    // shard inside parameter
  CHECK(IntersectParam(10, 10, {5, 25}) == ParamSlice{0, 5, 10});    // parameter inside shard
  CHECK_FALSE(IntersectParam(10, 10, {20, 30}).has_value());         // touching, not overlapping
  CHECK_FALSE(IntersectParam(10, 10, {0, 10}).has_value());
  CHECK_FALSE(IntersectParam(10, 0, {0, 30}).has_value());           // empty parameter
  CHECK_FALSE(IntersectParam(10, 10, {15, 15}).has_value());         // empty shard
}

TEST_CASE("IntersectParam slices of all parameters tile every shard exactly") {
  // Parameters of odd sizes laid out back to back in one flat buffer.
  const std::vector<size_t> sizes = {7, 1, 0, 13, 64, 3, 29, 2};
  std::vector<size_t> offsets(sizes.size());
  std::exclusive_scan(sizes.begin(), sizes.end(), offsets.begin(), size_t{0});
  const size_t numel = std::accumulate(sizes.begin(), sizes.end(), size_t{0});
  for (int world : {1, 2, 3, 4, 5, 8, 200}) {
    CAPTURE(world);
    std::vector<size_t> owned_per_param(sizes.size(), 0);
    for (int rank = 0; rank < world; ++rank) {
      const ShardRange shard = ShardFor(numel, world, rank);
      size_t next_shard_pos = 0;  // slices come in shard order and leave no holes
      for (size_t p = 0; p < sizes.size(); ++p) {
        const auto slice = IntersectParam(offsets[p], sizes[p], shard);
        if (!slice) continue;
        CHECK(slice->shard_begin == next_shard_pos);
        CHECK(offsets[p] + slice->param_begin == shard.begin + slice->shard_begin);
        next_shard_pos += slice->numel;
        owned_per_param[p] += slice->numel;
      }
      CHECK(next_shard_pos == shard.size());
    }
    CHECK(owned_per_param == sizes);  // every element of every parameter owned exactly once
  }
}

}  // namespace
}  // namespace dslaunch::runtime
