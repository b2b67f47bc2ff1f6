// Checkpoint file and directory names (runtime/checkpoint/names.h): made and parsed back, and
// every other name rejected.
#include "runtime/checkpoint/names.h"

#include <doctest/doctest.h>

#include <optional>
#include <string>

namespace dslaunch::runtime {
namespace {

TEST_CASE("Step directory names round-trip") {
  for (int64_t step : {int64_t{0}, int64_t{1}, int64_t{120}, int64_t{9223372036854775807}}) {
    CAPTURE(step);
    CHECK(ParseStepDirectoryName(StepDirectoryName(step)) == step);
  }
  CHECK(StepDirectoryName(120) == "global_step120");
}

TEST_CASE("ParseStepDirectoryName rejects every other name") {
  for (const char* name : {"global_step", "global_step-1", "global_step+1", "global_step 1", "global_step1 ",
                           "global_step01", "global_step1a", "global_step1.tmp", "Global_step1", "global_steps1",
                           "xglobal_step1", "global_step9223372036854775808", "latest", "meta.json", ""}) {
    CAPTURE(name);
    CHECK(ParseStepDirectoryName(name) == std::nullopt);
  }
}

TEST_CASE("Shard file names carry the rank in five digits and parse back") {
  CHECK(ShardFileName(0) == "rank00000.safetensors");
  CHECK(ShardFileName(12) == "rank00012.safetensors");
  CHECK(ShardFileName(123456) == "rank123456.safetensors");
  for (int rank : {0, 1, 99999, 123456}) CHECK(ParseShardFileName(ShardFileName(rank)) == rank);
  for (const char* name : {"rank1.safetensors", "rank0001.safetensors", "rank-0001.safetensors", "rank00001",
                           "rank00001.safetensors.tmp", "rankabcde.safetensors", "rank.safetensors", "meta.json"}) {
    CAPTURE(name);
    CHECK(ParseShardFileName(name) == std::nullopt);
  }
}

TEST_CASE("PathIn joins a directory and a name as std::filesystem does") {
  CHECK(PathIn("ckpt", "latest") == "ckpt/latest");
  CHECK(PathIn("ckpt/", "latest") == "ckpt/latest");
  CHECK(PathIn("/abs/ckpt", "global_step7") == "/abs/ckpt/global_step7");
  CHECK(PathIn("", "latest") == "latest");
  CHECK(PathIn("ckpt", "") == "ckpt/");
  CHECK(PathIn("d\xc3\xa9j\xc3\xa0", "meta.json") == "d\xc3\xa9j\xc3\xa0/meta.json");
  CHECK(PathIn("-ckpt", "@:[") == "-ckpt/@:[");
}

TEST_CASE("The latest file names a step directory, and its text is parsed leniently but safely") {
  CHECK(LatestFileText(8) == "global_step8\n");
  CHECK(ParseLatestFileText("global_step8\n") == std::optional<std::string>("global_step8"));
  CHECK(ParseLatestFileText("global_step8 \n\n") == std::optional<std::string>("global_step8"));
  for (const char* text : {"", "\n", "  \n", "../elsewhere/global_step8\n", "/abs\n"}) {
    CAPTURE(text);
    CHECK(ParseLatestFileText(text) == std::nullopt);
  }
  CHECK(TemporaryFileName(kMetaFileName) == "meta.json.tmp");
}

}  // namespace
}  // namespace dslaunch::runtime
