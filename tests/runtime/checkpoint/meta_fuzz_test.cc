// A bounded randomized test of CheckpointMetaFromJson (tests/support/fuzz_cases.h): a valid
// meta.json with values swapped for hostile ones (huge, negative, fractional, of another type),
// keys dropped or repeated, bytes flipped and ranges cut must give either a meta.json whose
// invariants hold (what resuming relies on: docs/checkpoint.md, "Which checkpoint a run
// resumes") or kDataLoss naming the file and a JSON path, never a crash or an exception.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "runtime/checkpoint/meta.h"
#include "runtime/core/random.h"
#include "tests/runtime/checkpoint/sample_meta.h"
#include "tests/support/fuzz_cases.h"

namespace dslaunch::runtime {
namespace {

// Cases in the unit tier (well under 0.5 s); scripts/fuzz.sh multiplies them.
constexpr int kDefaultCases = 4000;

struct Rng {
  uint64_t state;
  uint64_t Next() { return SplitMix64(state); }
  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(Next() % n); }
};

// A checkpoint of 2 ranks over 10 parameters, as the save writes it; the same state saved by a
// grid of 4 ranks (version 2).
std::string ValidMeta(bool grid) {
  return CheckpointMetaToJson(grid ? SampleGridCheckpointMeta() : SampleCheckpointMeta());
}

const char* const kValues[] = {"1000000000000000000", "-1", "0", "1e18", "1.5", "2147483648", "4294967298",
                               "9223372036854775807", "18446744073709551615", "-9223372036854775808", "\"12\"",
                               "null", "true", "[]", "{}", "[1e300, -2]", "\"rank00000.safetensors\"", "\"../x\"",
                               "\"DEADBEEF\"", "1e309", "3", "4", "11", "5"};

// The value after the `n`th ':' replaced by a hostile one (a whole number or string, or the first
// token of an object or array).
std::string SwapValue(std::string text, Rng& rng) {
  std::vector<size_t> colons;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == ':') colons.push_back(i);
  }
  if (colons.empty()) return text;
  const size_t at = colons[rng.Below(colons.size())] + 1;
  size_t end = text.find_first_of(",}]\n", at + 1);
  if (end == std::string::npos) end = text.size();
  text.replace(at, end - at, std::string(" ") + kValues[rng.Below(std::size(kValues))]);
  return text;
}

std::string Mutate(std::string text, Rng& rng) {
  const int edits = 1 + static_cast<int>(rng.Below(3));
  for (int e = 0; e < edits; ++e) {
    switch (rng.Below(5)) {
      case 0:
      case 1:
        text = SwapValue(std::move(text), rng);
        break;
      case 2:  // one byte replaced
        if (!text.empty()) text[rng.Below(text.size())] = "{}[]\",:0123456789.-e \\"[rng.Below(22)];
        break;
      case 3:  // a range cut
        text.erase(rng.Below(text.size() + 1), rng.Below(40));
        break;
      default: {  // a line repeated (a key given twice)
        const size_t start = text.rfind('\n', rng.Below(text.size() + 1));
        const size_t from = start == std::string::npos ? 0 : start + 1;
        const size_t end = text.find('\n', from);
        if (end != std::string::npos) text.insert(from, text.substr(from, end - from + 1));
        break;
      }
    }
  }
  return text;
}

// Every element of [0, numel) once: among the pieces' runs (version 2), and in rank order
// (version 1).
void CheckCovered(const CheckpointMeta& m) {
  std::vector<std::pair<uint64_t, uint64_t>> runs;  // begin, end
  uint64_t at = 0;
  for (const CheckpointPartition& p : m.partitions) {
    CHECK(p.end >= p.begin);
    if (m.version == 1) {
      CHECK(p.pieces.empty());
      CHECK(p.begin == at);
      at = p.end;
      runs.emplace_back(p.begin, p.end);
    }
    ForEachRun(p.pieces, [&](uint64_t begin, uint64_t count) { runs.emplace_back(begin, begin + count); });
  }
  std::sort(runs.begin(), runs.end());
  uint64_t covered = 0;
  for (const auto& [begin, end] : runs) {
    CHECK(begin == covered);
    covered = end;
  }
  CHECK(covered == m.numel);
}

TEST_CASE("CheckpointMetaFromJson on mutated meta.json files: invariants that hold, or data loss with a place") {
  const std::string valid[2] = {ValidMeta(false), ValidMeta(true)};
  REQUIRE(CheckpointMetaFromJson(valid[0], "ck/meta.json").ok());
  REQUIRE(CheckpointMetaFromJson(valid[1], "ck/meta.json").ok());
  Rng rng{testing::FuzzSeed()};
  const int cases = testing::FuzzCases(kDefaultCases);
  int accepted = 0;
  for (int i = 0; i < cases; ++i) {
    const std::string text = Mutate(valid[i % 2], rng);
    CAPTURE(testing::FuzzSeed());
    CAPTURE(i);
    CAPTURE(text);
    Result<CheckpointMeta> r = InternalError("not parsed");
    CHECK_NOTHROW(r = CheckpointMetaFromJson(text, "ck/meta.json"));
    if (!r.ok()) {
      CHECK(r.status().code() == StatusCode::kDataLoss);
      CHECK(r.status().message().rfind("ck/meta.json: $", 0) == 0);
      continue;
    }
    ++accepted;
    const CheckpointMeta& m = *r;
    CHECK(m.step >= 0);
    CHECK(m.applied_steps >= 0);
    CHECK(m.applied_steps <= m.step);
    CHECK(m.optimizer_step >= 0);
    CHECK(m.optimizer_step <= m.step);
    CHECK(m.zero_stage >= 0);
    CHECK(m.zero_stage <= 3);
    CHECK(m.loss_scaler.scale > 0.0);
    REQUIRE(static_cast<int>(m.partitions.size()) == m.world_size);
    for (size_t r = 0; r < m.partitions.size(); ++r) CHECK(m.partitions[r].rank == static_cast<int>(r));
    CHECK(m.world_size % (m.grid.pipeline * m.grid.tensor) == 0);
    CheckCovered(m);
    for (const CheckpointParameter& p : m.parameters) {
      CHECK(p.offset + p.numel <= m.numel);
      uint64_t elements = 1;
      for (int64_t d : p.shape) elements *= static_cast<uint64_t>(d);
      CHECK(elements == p.numel);
    }
  }
  // The mutations are not all fatal: some change a value to another valid one.
  CHECK(accepted > 0);
  CHECK(accepted < cases);
}

}  // namespace
}  // namespace dslaunch::runtime
