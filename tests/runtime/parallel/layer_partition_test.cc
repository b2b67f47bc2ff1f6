#include "runtime/parallel/layer_partition.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

namespace dslaunch::runtime {
namespace {

using Parts = std::vector<StageBlocks>;

TEST_CASE("Uniform partitions give the first stages the blocks that do not divide") {
  const LayerWeights w{10, 100, 5000, 5000};
  CHECK(*PartitionLayers(w, 4, PartitionMethod::kUniform) == Parts{{0, 3}, {3, 6}, {6, 8}, {8, 10}});
  CHECK(*PartitionLayers(w, 1, PartitionMethod::kUniform) == Parts{{0, 10}});
  CHECK(*PartitionLayers(w, 10, PartitionMethod::kUniform)->begin() == StageBlocks{0, 1});
}

TEST_CASE("Partitions by parameters give fewer blocks to the stages that carry the embeddings and the head") {
  // GPT-2 small's shape: 12 blocks of 7,087,872; wte 38,597,376 + wpe 786,432 on the first stage;
  // ln_f 1,536 + the head's copy of wte on the last.
  const LayerWeights gpt2{12, 7087872, 38597376 + 786432, 1536 + 38597376};
  // 4 stages: the ends hold ~5.6 blocks of parameters each besides their blocks; worked by hand,
  // the smallest largest stage is 5 blocks in the middle two (35.4 M) against 1 block + 39.4 M ends.
  const Parts four = *PartitionLayers(gpt2, 4, PartitionMethod::kParameters);
  CHECK(four == Parts{{0, 1}, {1, 6}, {6, 11}, {11, 12}});
  const std::vector<double> params = StageParameters(gpt2, four);
  CHECK(params[0] == 7087872 + 38597376 + 786432);
  CHECK(params[1] == 5 * 7087872.0);
  CHECK(params[3] == 7087872 + 1536 + 38597376);
  // 2 stages: 6 and 6 (the ends weigh about the same).
  CHECK(*PartitionLayers(gpt2, 2, PartitionMethod::kParameters) == Parts{{0, 6}, {6, 12}});
  // Of the splits with the smallest largest stage (3 blocks), the one whose stages differ least.
  CHECK(*PartitionLayers(LayerWeights{7, 10, 0, 0}, 3, PartitionMethod::kParameters) == Parts{{0, 2}, {2, 5}, {5, 7}});
  // Equal blocks and no ends: the uniform answer.
  const LayerWeights even{8, 10, 0, 0};
  CHECK(*PartitionLayers(even, 4, PartitionMethod::kParameters) == Parts{{0, 2}, {2, 4}, {4, 6}, {6, 8}});
}

TEST_CASE("A partition by parameters has no smaller largest stage than any other split (exhaustive, small)") {
  for (int blocks = 1; blocks <= 7; ++blocks) {
    for (int stages = 1; stages <= blocks; ++stages) {
      for (double first : {0.0, 5.0, 25.0}) {
        for (double last : {0.0, 7.0, 30.0}) {
          const LayerWeights w{blocks, 10, first, last};
          CAPTURE(blocks);
          CAPTURE(stages);
          CAPTURE(first);
          CAPTURE(last);
          const Parts got = *PartitionLayers(w, stages, PartitionMethod::kParameters);
          REQUIRE(got.size() == static_cast<size_t>(stages));
          CHECK(got.front().begin == 0);
          CHECK(got.back().end == blocks);
          for (size_t s = 0; s < got.size(); ++s) {
            CHECK(got[s].count() >= 1);
            if (s > 0) CHECK(got[s].begin == got[s - 1].end);
          }
          const std::vector<double> loads = StageParameters(w, got);
          const double worst = *std::max_element(loads.begin(), loads.end());
          // Every split into `stages` non-empty runs: choose the cut points.
          double best = 1e18;
          std::vector<int> cuts(stages - 1);
          auto search = [&](auto&& self, int i, int from) -> void {
            if (i == stages - 1) {
              Parts p;
              int begin = 0;
              for (int c : cuts) {
                p.push_back({begin, c});
                begin = c;
              }
              p.push_back({begin, blocks});
              const std::vector<double> l = StageParameters(w, p);
              best = std::min(best, *std::max_element(l.begin(), l.end()));
              return;
            }
            for (int c = from; c <= blocks - (stages - 1 - i); ++c) {
              cuts[i] = c;
              self(self, i + 1, c + 1);
            }
          };
          search(search, 0, 1);
          CHECK(worst == best);
        }
      }
    }
  }
}

TEST_CASE("More stages than blocks, and unknown methods, are refused with what to write") {
  auto many = PartitionLayers(LayerWeights{4, 1, 0, 0}, 5, PartitionMethod::kUniform);
  REQUIRE_FALSE(many.ok());
  CHECK(many.status().message() ==
        "pipeline.stages 5 is more than the model's 4 blocks (model.n_layer): each stage holds at least one block");
  CHECK(*ParsePartitionMethod("Parameters") == PartitionMethod::kParameters);
  CHECK(*ParsePartitionMethod("uniform") == PartitionMethod::kUniform);
  auto type = ParsePartitionMethod("type:transformer");
  REQUIRE_FALSE(type.ok());
  CHECK(type.status().message().find("use \"parameters\"") != std::string::npos);
}

}  // namespace
}  // namespace dslaunch::runtime
