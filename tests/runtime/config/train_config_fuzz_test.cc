// A bounded randomized test of ParseTrainConfig (tests/support/fuzz_cases.h): the bundled configs
// mutated (bytes flipped, ranges cut or repeated, hostile tokens inserted, numbers made extreme,
// deep nesting) and random JSON built from the schema's keys must give a parsed config or an
// error with a place (a JSON path or a line), never a crash, an exception, an internal error or
// an allocation out of proportion to the text. This file replaces the global operator new of its
// test program to see the largest allocation made while parsing.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <new>
#include <string>
#include <vector>

#include "runtime/config/train_config.h"
#include "runtime/core/random.h"
#include "runtime/train/memory_estimate.h"
#include "tests/support/fuzz_cases.h"

namespace {
std::atomic<bool> g_tracking{false};
std::atomic<size_t> g_largest{0};
}  // namespace

// GCC pairs these by name and warns that free() meets operator new's memory; here that is the pairing.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  if (g_tracking.load(std::memory_order_relaxed)) {
    size_t seen = g_largest.load(std::memory_order_relaxed);
    while (n > seen && !g_largest.compare_exchange_weak(seen, n, std::memory_order_relaxed)) {
    }
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace dslaunch::runtime {
namespace {

// Cases in the unit tier (about 0.3 s); scripts/fuzz.sh multiplies them.
constexpr int kDefaultCases = 3000;
// The largest single allocation parsing may make, as a multiple of the text's size (plus a
// constant): the document, its copy and the merged copy are each a few times the text.
constexpr size_t kAllocationPerTextByte = 64;
constexpr size_t kAllocationSlack = 1 << 20;

struct Rng {
  uint64_t state;
  uint64_t Next() { return SplitMix64(state); }
  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(Next() % n); }
  bool OneIn(size_t n) { return Below(n) == 0; }
};

const char* const kTokens[] = {
    "\"auto\"", "1e309", "-1", "0", "65537", "4000", "1e18", "true", "false", "null", "{}", "[]", "\"\"", "1.5",
    "9223372036854775808", "-9223372036854775809", "\"\\u0000\"", "\"\\ud800\"", "\"deepspeed_config\": \"ds.json\",",
    "\"zero_optimization\": true,", "\"stage\": 2, \"stage\": 3,", "[[[[[[[[", "]]]]", "\"n_layer\": 4096,",
    "\"block_size\": 65536,", "\"train_batch_size\": 1e15,", "\"seq_len\": 1,", ",", ":", "\"", "\\", "{", "}"};

const char* const kKeys[] = {
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "optimizer", "type",
    "params", "lr", "betas", "scheduler", "total_num_steps", "fp16", "bf16", "enabled", "zero_optimization", "stage",
    "reduce_bucket_size", "model", "n_layer", "n_head", "n_embd", "block_size", "vocab_size", "layers", "data",
    "format", "train", "val", "seq_len", "steps", "checkpoint", "dir", "load", "async", "deepspeed_config", "AdamW",
    "gpt", "mlp", "x"};

std::string Mutate(std::string text, Rng& rng) {
  const int edits = 1 + static_cast<int>(rng.Below(4));
  for (int e = 0; e < edits; ++e) {
    const size_t at = rng.Below(text.size() + 1);
    switch (rng.Below(7)) {
      case 0:  // one byte replaced, usually by a JSON character
        if (!text.empty()) text[rng.Below(text.size())] = rng.OneIn(4) ? static_cast<char>(rng.Next()) : "{}[]\",:0123456789.-eE tfn\\"[rng.Below(26)];
        break;
      case 1:  // a range cut
        text.erase(std::min(at, text.size()), rng.Below(24));
        break;
      case 2: {  // a range repeated elsewhere (duplicate keys, deeper nesting)
        const std::string piece = text.substr(std::min(at, text.size()), rng.Below(64));
        text.insert(rng.Below(text.size() + 1), piece);
        break;
      }
      case 3:
      case 4:  // a hostile token
        text.insert(at, kTokens[rng.Below(std::size(kTokens))]);
        break;
      case 5: {  // a number made extreme
        const size_t digit = text.find_first_of("0123456789", at);
        if (digit == std::string::npos) break;
        const size_t end = text.find_first_not_of("0123456789.eE+-", digit);
        static const char* const kNumbers[] = {"0", "1048577", "65537", "4097", "2147483648", "1e300", "4.5"};
        text.replace(digit, (end == std::string::npos ? text.size() : end) - digit, kNumbers[rng.Below(7)]);
        break;
      }
      default:  // deep nesting, sometimes far past the limit
        text.insert(at, std::string(rng.OneIn(8) ? 100000 : 40 + rng.Below(40), rng.OneIn(2) ? '[' : '{'));
        break;
    }
  }
  return text;
}

// A random JSON value over the schema's keys; objects at the top.
std::string RandomJson(Rng& rng, int depth) {
  const size_t kind = depth == 0 ? 0 : rng.Below(depth > 6 ? 5 : 7);
  switch (kind) {
    case 0:
    case 5: {
      std::string s = "{";
      const size_t n = rng.Below(depth == 0 ? 12 : 5);
      for (size_t i = 0; i < n; ++i) {
        s += (i ? ", \"" : "\"") + std::string(kKeys[rng.Below(std::size(kKeys))]) + "\": " + RandomJson(rng, depth + 1);
      }
      return s + "}";
    }
    case 6: {
      std::string s = "[";
      const size_t n = rng.Below(4);
      for (size_t i = 0; i < n; ++i) s += (i ? ", " : "") + RandomJson(rng, depth + 1);
      return s + "]";
    }
    case 1:
      return std::to_string(static_cast<int64_t>(rng.Next() >> rng.Below(64)) * (rng.OneIn(4) ? -1 : 1));
    case 2:
      return rng.OneIn(2) ? "true" : rng.OneIn(2) ? "false" : "null";
    case 3:
      return "\"" + std::string(kKeys[rng.Below(std::size(kKeys))]) + "\"";
    default:
      return std::to_string(std::ldexp(static_cast<double>(rng.Next() >> 11), static_cast<int>(rng.Below(120)) - 90));
  }
}

std::vector<std::string> BundledConfigs() {
  std::vector<std::filesystem::path> paths;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(DSLAUNCH_SOURCE_DIR) / "configs")) {
    if (e.path().extension() == ".json") paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());  // the same corpus order on every machine
  std::vector<std::string> texts;
  for (const auto& p : paths) {
    std::ifstream in(p);
    texts.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return texts;
}

TEST_CASE("ParseTrainConfig gives a config or an error with a place for mutated and random JSON, never a crash") {
  const std::vector<std::string> corpus = BundledConfigs();
  REQUIRE(corpus.size() >= 3);
  const uint64_t seed = testing::FuzzSeed();
  const int cases = testing::FuzzCases(kDefaultCases);
  Rng rng{seed};
  int parsed = 0, refused = 0;
  for (int i = 0; i < cases; ++i) {
    CAPTURE(seed);
    CAPTURE(i);
    const std::string text = rng.OneIn(4) ? RandomJson(rng, 0) : Mutate(corpus[rng.Below(corpus.size())], rng);
    const std::string ds = Mutate(R"({"train_batch_size": 16, "zero_optimization": {"stage": 2}})", rng);
    const int world = std::vector<int>{1, 2, 3, 8}[rng.Below(4)];
    ConfigLoader loader = [&](const std::string& path) -> Result<std::string> {
      if (path.size() >= 7 && path.compare(path.size() - 7, 7, "ds.json") == 0) return ds;
      return NotFoundError(path + ": no such file");
    };
    g_largest.store(0);
    g_tracking.store(true);
    Result<TrainConfig> r = InternalError("not run");
    CHECK_NOTHROW(r = ParseTrainConfig(text, "fuzz.json", world, loader));
    g_tracking.store(false);
    CHECK(g_largest.load() <= kAllocationPerTextByte * (text.size() + ds.size()) + kAllocationSlack);
    if (!r.ok()) {
      ++refused;
      const std::string m = r.status().message();
      CAPTURE(m);
      // kNotFound: a mutated "deepspeed_config" names a file the loader does not have.
      CHECK((r.status().code() == StatusCode::kInvalidArgument || r.status().code() == StatusCode::kNotFound));
      // One error, or several: "N errors in the configuration:" and one indented line each; every
      // error names its file and a JSON path or a line.
      std::vector<std::string> errors;
      if (m.find("errors in the configuration:\n") != std::string::npos) {
        for (size_t at = m.find("\n  "); at != std::string::npos; at = m.find("\n  ", at + 1)) {
          errors.push_back(m.substr(at + 3, m.find('\n', at + 1) - at - 3));
        }
        CHECK(m.rfind(std::to_string(errors.size()) + " errors in the configuration:\n", 0) == 0);
      } else {
        errors.push_back(m);
      }
      for (const std::string& e : errors) {
        CAPTURE(e);
        CHECK((e.rfind("fuzz.json", 0) == 0 || e.rfind("ds.json", 0) == 0));
        CHECK((e.find("$") != std::string::npos || e.find("line ") != std::string::npos));
      }
      continue;
    }
    ++parsed;
    const TrainConfig& c = *r;
    CHECK(c.batch.train_batch_size == c.batch.micro_batch_per_gpu * c.batch.gradient_accumulation_steps * world);
    CHECK(c.batch.micro_batch_per_gpu <= (1 << 20));
    CHECK(c.batch.gradient_accumulation_steps <= (1 << 20));
    const double need = EstimateTrainingMemory(c, world).total();
    CHECK(std::isfinite(need));
    CHECK(need > 0);
  }
  MESSAGE(parsed << " parsed, " << refused << " refused of " << cases << " cases (seed " << seed << ")");
  CHECK(parsed > 0);  // the mutations leave some configs valid: the accepting path is exercised too
}

}  // namespace
}  // namespace dslaunch::runtime
