#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>

#include "runtime/data/batch_sampler.h"
#include "runtime/data/byte_tokenizer.h"
#include "runtime/data/prepare_text.h"
#include "runtime/data/token_shard.h"
#include "tests/support/subprocess.h"

namespace dslaunch::runtime {
namespace {

TEST_CASE("Token shards use llm.c's header and round-trip") {
  std::vector<uint16_t> tokens = {1, 2, 65535, 0, 256};
  std::string bytes = EncodeTokenShard(tokens);
  REQUIRE(bytes.size() == 1024 + 10);
  int32_t header[3];
  std::memcpy(header, bytes.data(), sizeof(header));
  CHECK(header[0] == 20240520);
  CHECK(header[1] == 1);
  CHECK(header[2] == 5);
  auto decoded = DecodeTokenShard(bytes, "x.bin");
  REQUIRE(decoded.ok());
  CHECK(*decoded == tokens);
}

TEST_CASE("A truncated, padded or foreign shard is data loss naming the file") {
  std::string good = EncodeTokenShard(std::vector<uint16_t>{1, 2, 3});
  for (const std::string& bad : {good.substr(0, good.size() - 1), good + "x", good.substr(0, 100),
                                 std::string(1030, '\0')}) {
    auto r = DecodeTokenShard(bad, "data/train.bin");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kDataLoss);
    CHECK(r.status().message().find("data/train.bin") == 0);
  }
}

TEST_CASE("Token shards are written atomically and read back") {
  testing::TempDir dir;
  std::string path = dir.path() + "/t.bin";
  std::vector<uint16_t> tokens = EncodeBytes("hello, world\n");
  REQUIRE(WriteTokenShard(path, tokens).ok());
  auto back = ReadTokenShard(path);
  REQUIRE(back.ok());
  CHECK(DecodeBytes(*back) == "hello, world\n");
  CHECK(ReadTokenShard(dir.path() + "/missing.bin").status().code() == StatusCode::kNotFound);
}

TEST_CASE("The byte tokenizer round-trips any bytes") {
  std::string text("a\0\xff\n\xc3\xa9", 6);
  CHECK(DecodeBytes(EncodeBytes(text)) == text);
  CHECK(EncodeBytes("\xff")[0] == 255);
  CHECK(DecodeBytes(std::vector<uint16_t>{300}) == "?");
}

TEST_CASE("Every window appears once per epoch, in an order that depends on the seed") {
  BatchGeometry g{1000 * 16 + 1, 16, 4, 1, 1};
  REQUIRE(g.windows() == 1000);
  std::set<int64_t> seen;
  for (int64_t s = 0; s < 1000; ++s) seen.insert(WindowForSample(7, g, s));
  CHECK(seen.size() == 1000);
  std::vector<int64_t> a, b, c;
  for (int64_t s = 0; s < 20; ++s) {
    a.push_back(WindowForSample(7, g, s));
    b.push_back(WindowForSample(8, g, s));
    c.push_back(WindowForSample(7, g, s + 1000));  // the next epoch
  }
  CHECK(a != b);
  CHECK(a != c);
}

TEST_CASE("A step trains on the same samples whatever the world size and accumulation") {
  const int64_t tokens = 5000 * 8 + 1;
  // Global batch 8 of micro batch 2: world 1 x accumulation 4, 2 x 2, 4 x 1.
  auto step_samples = [&](int world, int accumulation, int64_t step) {
    BatchGeometry g{tokens, 8, 2, accumulation, world};
    std::vector<int64_t> all;
    for (int m = 0; m < accumulation; ++m) {
      for (int r = 0; r < world; ++r) {
        auto w = WindowsForMicroStep(3, g, step, m, r);
        all.insert(all.end(), w.begin(), w.end());
      }
    }
    std::sort(all.begin(), all.end());
    return all;
  };
  for (int64_t step : {0, 1, 17, 2600}) {  // 2600 crosses an epoch boundary (5000 windows / 8)
    CAPTURE(step);
    auto one = step_samples(1, 4, step);
    CHECK(one.size() == 8);
    CHECK(step_samples(2, 2, step) == one);
    CHECK(step_samples(4, 1, step) == one);
    BatchGeometry g{tokens, 8, 2, 4, 1};
    std::vector<int64_t> direct;
    for (int j = 0; j < 8; ++j) direct.push_back(WindowForSample(3, g, step * 8 + j));
    std::sort(direct.begin(), direct.end());
    CHECK(direct == one);
  }
}

TEST_CASE("A step's samples depend only on seed, step and index in the global batch, not on the split") {
  // What a restart at another world size relies on (docs/data.md): the global batch 8 split as
  // world x micro x accumulation in every way a restart may choose, including other micro-batches.
  const int64_t tokens = 3000 * 4 + 1;
  struct Split {
    int world, micro, accumulation;
  };
  const Split splits[] = {{1, 8, 1}, {1, 2, 4}, {1, 1, 8}, {2, 4, 1}, {2, 1, 4},
                          {2, 2, 2}, {4, 2, 1}, {4, 1, 2}, {8, 1, 1}};
  // The samples in global-batch order: micro-step m of rank r holds indices
  // m x micro x world + r x micro + i.
  auto ordered = [&](const Split& s, int64_t step) {
    BatchGeometry g{tokens, 4, s.micro, s.accumulation, s.world};
    std::vector<int64_t> batch(8);
    for (int m = 0; m < s.accumulation; ++m) {
      for (int r = 0; r < s.world; ++r) {
        auto w = WindowsForMicroStep(11, g, step, m, r);
        REQUIRE(w.size() == static_cast<size_t>(s.micro));
        for (int i = 0; i < s.micro; ++i) batch[static_cast<size_t>((m * s.world + r) * s.micro + i)] = w[i];
      }
    }
    return batch;
  };
  for (int64_t step : {0, 5, 374, 375, 1000}) {  // 3000 windows / 8: step 375 starts the second epoch
    CAPTURE(step);
    const auto reference = ordered(splits[0], step);
    auto sorted_reference = reference;
    std::sort(sorted_reference.begin(), sorted_reference.end());
    for (const Split& s : splits) {
      CAPTURE(s.world);
      CAPTURE(s.micro);
      const auto batch = ordered(s, step);
      CHECK(batch == reference);  // the same sample at the same index
      auto sorted = batch;
      std::sort(sorted.begin(), sorted.end());
      CHECK(sorted == sorted_reference);  // hence the same multiset
    }
  }
}

TEST_CASE("prepare-text splits the last fraction of the tokens off for validation") {
  auto split = SplitTokens(EncodeBytes("0123456789"), 0.2);
  CHECK(DecodeBytes(split.train) == "01234567");
  CHECK(DecodeBytes(split.val) == "89");
  testing::TempDir dir;
  std::ofstream(dir.path() + "/a.txt") << "hello ";
  std::ofstream(dir.path() + "/b.txt") << "world";
  PrepareTextOptions o{{dir.path() + "/a.txt", dir.path() + "/b.txt"}, dir.path() + "/t.bin", dir.path() + "/v.bin", 0.1};
  auto r = PrepareText(o);
  REQUIRE(r.ok());
  CHECK(DecodeBytes(*ReadTokenShard(dir.path() + "/t.bin")) == "hello worl");
  CHECK(DecodeBytes(*ReadTokenShard(dir.path() + "/v.bin")) == "d");
  o.inputs.push_back(dir.path() + "/missing.txt");
  CHECK(PrepareText(o).status().message().find("missing.txt") != std::string::npos);
}

}  // namespace
}  // namespace dslaunch::runtime
