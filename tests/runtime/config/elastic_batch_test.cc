// DeepSpeed's elasticity algorithm (runtime/config/elastic_batch.h) on cases computed by hand from the
// algorithm (the working is in the comments) and on the answers DeepSpeed's own tests assert
// (tests/unit/elasticity/test_elastic.py: 9792 valid at 23 world sizes; micro-batch 17 at 64;
// micro-batch 3 at 7 for [1, 2, 3, 7] up to 32); and the split a restart uses without elasticity.
#include <doctest/doctest.h>

#include <cmath>

#include "runtime/config/elastic_batch.h"

namespace dslaunch::runtime {
namespace {

ElasticityConfig Elastic(std::vector<int64_t> micro, int64_t max_batch, int64_t min_gpus, int64_t max_gpus,
                         bool prefer_larger = true) {
  ElasticityConfig c;
  c.enabled = true;
  c.micro_batch_sizes = std::move(micro);
  c.max_train_batch_size = max_batch;
  c.min_gpus = min_gpus;
  c.max_gpus = max_gpus;
  c.prefer_larger_batch = prefer_larger;
  return c;
}

TEST_CASE("ComputeElasticBatch chooses the candidate valid at the most world sizes") {
  struct Case {
    const char* name;
    ElasticityConfig config;
    int64_t batch;
    std::vector<int64_t> valid;
  };
  const Case cases[] = {
      // Bases 2 and LCM 2: 2 x 4 = 8 (2 x 6 = 12 > 8). 8 / 2 = 4: divisors 1, 2, 4.
      {"one micro-batch size", Elastic({2}, 8, 1, 4), 8, {1, 2, 4}},
      // The same, world sizes below min_gpus 2 dropped.
      {"min_gpus", Elastic({2}, 8, 2, 4), 8, {2, 4}},
      // Bases 3 -> 18 (3 x 6; x12 = 36 > 20), 5 -> 20 (5 x 4; x6 = 30), LCM 15 -> 15 (x2 = 30).
      // Within max_gpus 4: 18 = 3 x 6 -> {1, 2, 3}; 20 = 5 x 4 -> {1, 2, 4}; 15 = 3 x 5 = 5 x 3 -> {1, 3}.
      // 18 and 20 tie at three: the larger wins.
      {"tie, prefer larger", Elastic({3, 5}, 20, 1, 4), 20, {1, 2, 4}},
      {"tie, prefer smaller", Elastic({3, 5}, 20, 1, 4, /*prefer_larger=*/false), 18, {1, 2, 3}},
      // DeepSpeed's example: bases 2 -> 1680 (2 x 840; x1260 = 2520 > 2000), 4 -> 1440 (4 x 360),
      // 6 -> 1440 (6 x 240), LCM 12 -> 1440 (12 x 120). 1440 is valid at the divisors of 720
      // (= 1440 / 2; 1440 / 4 and / 6 divide it): 30; 1680 at those of 840 = 2^3 x 3 x 5 x 7: 32.
      {"DeepSpeed's example [2, 4, 6] up to 2000", Elastic({2, 4, 6}, 2000, 1, 10000), 1680,
       {1,  2,  3,  4,  5,  6,  7,  8,  10,  12,  14,  15,  20,  21,  24,  28,
        30, 35, 40, 42, 56, 60, 70, 84, 105, 120, 140, 168, 210, 280, 420, 840}},
      // Bases 3 -> 18, 5 -> 20, 7 -> 14 (7 x 2; x4 = 28 > 20), and the LCM 105, already past 20,
      // stays a candidate as in DeepSpeed: 105 / 3 = 35, / 5 = 21, / 7 = 15 give
      // {1, 3, 5, 7, 15, 21, 35}, seven sizes against 18's four ({1, 2, 3, 6}).
      {"an LCM past the maximum stays a candidate", Elastic({3, 5, 7}, 20, 1, 10000), 105,
       {1, 3, 5, 7, 15, 21, 35}},
      // DeepSpeed's test_basic_10k: the LCM 816 x 12 = 9792, at 23 world sizes in [32, 1500].
      {"DeepSpeed's 10k case", Elastic({8, 12, 16, 17}, 10000, 32, 1500), 9792,
       {32, 34, 36, 48, 51, 64, 68, 72, 96, 102, 136, 144, 153, 192, 204, 272, 288, 306, 408, 576, 612, 816, 1224}},
      // DeepSpeed's test_proper_mbsz: the LCM 42 (past 32) ties with 24 at eight sizes; larger wins.
      {"DeepSpeed's [1, 2, 3, 7] up to 32", Elastic({1, 2, 3, 7}, 32, 1, 1500), 42, {1, 2, 3, 6, 7, 14, 21, 42}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    auto batch = ComputeElasticBatch(c.config);
    REQUIRE_MESSAGE(batch.ok(), batch.status().ToString());
    CHECK(batch->train_batch_size == c.batch);
    CHECK(batch->valid_world_sizes == c.valid);
  }
}

TEST_CASE("SplitElasticBatch takes the largest micro-batch size dividing the per-rank share") {
  struct Case {
    ElasticityConfig config;
    int world;
    int64_t micro, accumulation;
  };
  const Case cases[] = {
      {Elastic({2}, 8, 1, 4), 2, 2, 2},
      {Elastic({2}, 8, 1, 4), 4, 2, 1},
      {Elastic({2}, 8, 1, 4), 1, 2, 4},
      {Elastic({3, 5}, 20, 1, 4), 2, 5, 2},                         // 20 / 2 = 10 = 5 x 2
      {Elastic({3, 5}, 20, 1, 4, /*prefer_larger=*/false), 3, 3, 2},  // 18 / 3 = 6 = 3 x 2
      {Elastic({2, 4, 6}, 2000, 1, 10000), 4, 6, 70},                // 1680 / 4 = 420 = 6 x 70
      {Elastic({2, 4, 6}, 2000, 1, 10000), 24, 2, 35},               // 70: not by 6 nor 4, by 2
      {Elastic({8, 12, 16, 17}, 10000, 32, 1500), 64, 17, 9},        // DeepSpeed: 17 at 64
      {Elastic({1, 2, 3, 7}, 32, 1, 1500), 7, 3, 2},                 // DeepSpeed: 3 at 7
  };
  for (const Case& c : cases) {
    CAPTURE(c.world);
    auto batch = ComputeElasticBatch(c.config);
    REQUIRE(batch.ok());
    auto split = SplitElasticBatch(c.config, *batch, c.world);
    REQUIRE_MESSAGE(split.ok(), split.status().ToString());
    CHECK(split->micro_batch == c.micro);
    CHECK(split->accumulation == c.accumulation);
    CHECK(split->micro_batch * split->accumulation * c.world == batch->train_batch_size);
  }
}

TEST_CASE("A world size elasticity does not allow is refused with the sizes that are") {
  const ElasticityConfig config = Elastic({2}, 8, 1, 4);
  auto batch = ComputeElasticBatch(config);
  REQUIRE(batch.ok());
  auto split = SplitElasticBatch(config, *batch, 3);
  REQUIRE_FALSE(split.ok());
  CHECK(split.status().code() == StatusCode::kInvalidArgument);
  CHECK(split.status().message() ==
        "world size 3 cannot keep the elastic train_batch_size 8: it can run at world sizes 1, 2, 4");
  const ElasticityConfig big = Elastic({8, 12, 16, 17}, 10000, 32, 1500);
  auto ten_k = ComputeElasticBatch(big);
  REQUIRE(ten_k.ok());
  CHECK_FALSE(SplitElasticBatch(big, *ten_k, 128).ok());  // DeepSpeed's test_invalid_world_size
  CHECK_FALSE(SplitElasticBatch(big, *ten_k, 16).ok());   // below min_gpus
}

TEST_CASE("ComputeElasticBatch refuses configs DeepSpeed refuses, saying why") {
  struct Case {
    const char* name;
    ElasticityConfig config;
    const char* message;
  };
  ElasticityConfig disabled = Elastic({2}, 8, 1, 4);
  disabled.enabled = false;
  ElasticityConfig v2 = Elastic({2}, 8, 1, 4);
  v2.version = 0.2;
  const Case cases[] = {
      {"disabled", disabled, "elasticity is not enabled"},
      {"version", v2, "version 0.2 is not implemented; this runtime implements DeepSpeed's elasticity version 0.1"},
      {"no micro-batch sizes", Elastic({}, 8, 1, 4), "micro_batch_sizes is empty"},
      {"micro-batch past the maximum", Elastic({16}, 8, 1, 4),
       "micro-batch size 16 is outside [1, max_train_batch_size 8]"},
      {"min above max", Elastic({2}, 8, 5, 4), "min_gpus 5 and max_gpus 4 must satisfy 1 <= min_gpus <= max_gpus"},
      // 4 x 2 = 8: 8 / 4 = 2 has divisors 1 and 2, none in [3, 3].
      {"no valid world size", Elastic({4}, 8, 3, 3),
       "no world size in [min_gpus 3, max_gpus 3] can run any candidate batch (8) with these micro-batch sizes"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    auto batch = ComputeElasticBatch(c.config);
    REQUIRE_FALSE(batch.ok());
    CHECK(batch.status().code() == StatusCode::kInvalidArgument);
    CHECK(batch.status().message() == c.message);
  }
}

TEST_CASE("SplitForRestart keeps the batch with a micro-batch no larger than configured") {
  struct Case {
    int64_t batch, cap;
    int world;
    std::optional<BatchSplit> split;
  };
  const Case cases[] = {
      {32, 8, 2, BatchSplit{8, 2}},   // 16 per rank: the configured 8 fits
      {32, 8, 8, BatchSplit{4, 1}},   // 4 per rank: 8 does not fit, 4 does
      {32, 3, 2, BatchSplit{2, 8}},   // 16 per rank: the largest divisor <= 3 is 2
      {8, 2, 2, BatchSplit{2, 2}},
      {12, 5, 3, BatchSplit{4, 1}},   // 4 per rank
      {32, 8, 3, std::nullopt},       // 3 does not divide 32
      {7, 1, 7, BatchSplit{1, 1}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.batch);
    CAPTURE(c.world);
    auto split = SplitForRestart(c.batch, c.cap, c.world);
    REQUIRE(split.has_value() == c.split.has_value());
    if (!split) continue;
    CHECK(split->micro_batch == c.split->micro_batch);
    CHECK(split->accumulation == c.split->accumulation);
  }
}

TEST_CASE("Divisors agrees with trial division for every n up to 3,000 and bounds at the edges") {
  for (int64_t n = 1; n <= 3000; ++n) {
    const int64_t root = static_cast<int64_t>(std::sqrt(static_cast<double>(n)));
    for (int64_t bound : {int64_t{0}, int64_t{1}, root - 1, root, root + 1, n - 1, n, n + 1, n / 2, 3 * n}) {
      std::vector<int64_t> want;
      for (int64_t d = 1; d <= n && d <= bound; ++d) {
        if (n % d == 0) want.push_back(d);
      }
      CAPTURE(n);
      CAPTURE(bound);
      REQUIRE(Divisors(n, bound) == want);  // ascending, each once (a square's root too)
    }
  }
  CHECK(Divisors(36, 100) == std::vector<int64_t>{1, 2, 3, 4, 6, 9, 12, 18, 36});
  CHECK(Divisors(1, 0).empty());
  CHECK(ListWorldSizes({}).empty());
  CHECK(ListWorldSizes({7}) == "7");
  CHECK(ListWorldSizes({1, 2, 3}, 3) == "1, 2, 3");
  CHECK(ListWorldSizes({1, 2, 3, 4}, 3) == "1, 2, 3, ... and 1 more");
}

TEST_CASE("Divisors lists the divisors up to a bound, in order, and ListWorldSizes shortens long lists") {
  CHECK(Divisors(12, 100) == std::vector<int64_t>{1, 2, 3, 4, 6, 12});
  CHECK(Divisors(12, 4) == std::vector<int64_t>{1, 2, 3, 4});
  CHECK(Divisors(16, 100) == std::vector<int64_t>{1, 2, 4, 8, 16});
  CHECK(Divisors(1, 1) == std::vector<int64_t>{1});
  CHECK(Divisors(97, 10) == std::vector<int64_t>{1});
  // The prime 2^61 - 1: the bound keeps the search short.
  CHECK(Divisors(2305843009213693951, kMaxListedWorldSize) == std::vector<int64_t>{1});
  CHECK(ListWorldSizes({1, 2, 4}) == "1, 2, 4");
  CHECK(ListWorldSizes({1, 2, 3, 4, 5}, 3) == "1, 2, 3, ... and 2 more");
}

}  // namespace
}  // namespace dslaunch::runtime
