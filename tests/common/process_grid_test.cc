#include "common/process_grid.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

namespace dslaunch::runtime {
namespace {

using Ranks = std::vector<int>;

TEST_CASE("ProcessGrid orders the axes pipeline, data, tensor with tensor innermost, as DeepSpeed") {
  // 2 stages x 2 data x 2 tensor on 8 ranks, worked by hand from rank = (p x 2 + d) x 2 + t.
  const ProcessGrid grid = *ProcessGrid::Create(8, 2, 2);
  CHECK(grid.shape() == GridShape{2, 2, 2});
  const GridCoordinates expected[8] = {{0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {0, 1, 1},
                                       {1, 0, 0}, {1, 0, 1}, {1, 1, 0}, {1, 1, 1}};
  for (int r = 0; r < 8; ++r) {
    CAPTURE(r);
    CHECK(grid.CoordinatesOf(r) == expected[r]);
    CHECK(grid.RankAt(expected[r]) == r);
  }
  CHECK(grid.GroupOf(5, GridAxis::kTensor) == Ranks{4, 5});
  CHECK(grid.GroupOf(5, GridAxis::kData) == Ranks{5, 7});
  CHECK(grid.GroupOf(5, GridAxis::kPipeline) == Ranks{1, 5});
  CHECK(grid.PreviousStage(5) == 1);
  CHECK(grid.NextStage(5) == -1);
  CHECK(grid.PreviousStage(2) == -1);
  CHECK(grid.NextStage(2) == 6);
  CHECK(grid.Describe(6) == "stage 1/2, data 1/2, tensor 0/2");
}

TEST_CASE("Every rank is in exactly one group per axis, and the group index is the members' own") {
  const std::vector<std::tuple<int, int, int>> shapes = {{8, 2, 2}, {12, 3, 2}, {16, 4, 1}, {6, 1, 3}, {24, 2, 4}, {1, 1, 1}};
  for (auto [world, pp, tp] : shapes) {
    CAPTURE(world);
    CAPTURE(pp);
    CAPTURE(tp);
    const ProcessGrid grid = *ProcessGrid::Create(world, pp, tp);
    CHECK(grid.shape().world() == world);
    for (GridAxis axis : {GridAxis::kPipeline, GridAxis::kData, GridAxis::kTensor}) {
      CAPTURE(GridAxisName(axis));
      std::vector<std::set<int>> groups(grid.GroupCount(axis));
      for (int r = 0; r < world; ++r) {
        const Ranks members = grid.GroupOf(r, axis);
        REQUIRE(members.size() == static_cast<size_t>(grid.Size(axis)));
        // Its place in the group is its coordinate along the axis; the others agree on the index.
        CHECK(members[grid.CoordinatesOf(r).Along(axis)] == r);
        for (int m : members) CHECK(grid.GroupIndex(m, axis) == grid.GroupIndex(r, axis));
        groups[grid.GroupIndex(r, axis)].insert(r);
      }
      size_t total = 0;
      for (const auto& g : groups) {
        CHECK(g.size() == static_cast<size_t>(grid.Size(axis)));  // one index per group
        total += g.size();
      }
      CHECK(total == static_cast<size_t>(world));  // disjoint and covering
    }
  }
}

TEST_CASE("A tensor group is consecutive ranks, so it shares a node when its size divides the ranks per node") {
  const ProcessGrid grid = *ProcessGrid::Create(16, 2, 4);
  for (int r = 0; r < 16; ++r) {
    const Ranks tensor = grid.GroupOf(r, GridAxis::kTensor);
    CHECK(tensor.back() - tensor.front() == 3);
    CHECK(tensor.front() % 4 == 0);  // on 4 ranks per node: one node
  }
}

TEST_CASE("ProcessGrid refuses sizes that do not divide the world, naming the keys and what to do") {
  auto bad = ProcessGrid::Create(8, 3, 1);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "pipeline.stages 3 x tensor_parallel.autotp_size 1 = 3 ranks per model copy does not divide the 8 ranks "
        "of the job: give the job a multiple of 3 ranks, or change the two sizes");
  CHECK(ProcessGrid::Create(8, 0, 1).status().message() == "pipeline.stages must be at least 1, got 0");
  CHECK(ProcessGrid::Create(8, 1, 0).status().message() == "tensor_parallel.autotp_size must be at least 1, got 0");
  CHECK_FALSE(ProcessGrid::Create(4, 2, 4).ok());
  CHECK(ProcessGrid::DataParallel(5).shape() == GridShape{1, 5, 1});
}

TEST_CASE("DescribeGridShape writes the three sizes, one stage in the singular") {
  CHECK(DescribeGridShape({2, 2, 2}) == "2 stages x 2 data x 2 tensor");
  CHECK(DescribeGridShape({1, 4, 2}) == "1 stage x 4 data x 2 tensor");
}

}  // namespace
}  // namespace dslaunch::runtime
