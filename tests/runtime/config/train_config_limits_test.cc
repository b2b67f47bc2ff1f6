// train.json from a hostile or careless hand (docs/train-json.md, "Limits"): nesting, size, and
// values that would overflow or allocate without bound are refused with the file and JSON path.
#include "runtime/config/train_config.h"

#include "runtime/config/json_fields.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace dslaunch::runtime {
namespace {

// A valid train.json with `extra` keys appended and the model, data and batch keys replaceable.
std::string Base(const std::string& extra,
                 const std::string& model = R"("type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 16)",
                 const std::string& data = R"("train": "data/train.bin")",
                 const std::string& batch = R"("train_micro_batch_size_per_gpu": 4)") {
  return "{" + batch + R"(, "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
    "model": {)" + model + R"(}, "data": {)" + data + R"(}, "train": {"steps": 10})" + extra + "}";
}

std::string ErrorOf(const std::string& text, int world = 2) {
  Result<TrainConfig> r = ParseTrainConfig(text, "train.json", world, [](const std::string& p) -> Result<std::string> {
    return NotFoundError(p);
  });
  if (r.ok()) return "OK";
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  return r.status().message();
}

std::string Repeat(const std::string& s, int n) {
  std::string out;
  out.reserve(s.size() * static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST_CASE("Nesting past 64 levels is refused before parsing, with where it happens") {
  // Before: 100,000 levels overflowed the stack (SIGSEGV) in the recursive copy of the document.
  const std::string objects = Repeat("{\"a\":", 100000) + "1" + std::string(100000, '}');
  CHECK(ErrorOf(objects) == "train.json: $" + Repeat(".a", 64) +
                                ": nesting depth 65 at line 1, column 321 exceeds the limit of 64 levels of objects "
                                "and arrays");
  const std::string arrays = std::string(100000, '[') + std::string(100000, ']');
  const std::string message = ErrorOf(arrays);
  CHECK(message.rfind("train.json: $[0][0][0]", 0) == 0);
  CHECK(message.find("...: nesting depth 65 at line 1, column 65 exceeds the limit of 64 levels") != std::string::npos);
  // Brackets inside strings do not count; 64 levels are allowed (the parse goes on to the keys).
  CHECK(ErrorOf(Base(", \"deep\": " + Repeat("{\"a\":", 63) + "\"[[[[{{{{\"" + std::string(63, '}'))) ==
        "train.json: $.deep: unknown key (did you mean \"seed\"?)");
  CHECK(ErrorOf(Base(", \"deep\": " + Repeat("{\"a\":", 64) + "1" + std::string(64, '}'))).find("nesting depth 65") !=
        std::string::npos);
}

TEST_CASE("A number past a double's range is an error with its place, not an internal error") {
  // Before: nlohmann's out_of_range escaped as "unexpected error while parsing" (found by the
  // randomized test).
  CHECK(ErrorOf("{\"seed\": 1,\n \"gradient_clipping\": 1e309}") ==
        "train.json: line 2, column 23: number overflow parsing '1e309' (beyond the range of a double)");
}

TEST_CASE("A key too long to be a typo of a known one gets no suggestion, and no quadratic edit distance") {
  // Before: every unknown key was compared with every known one by edit distance, whose cost is
  // the product of the lengths; the randomized test spent three quarters of its time there on
  // long mutated keys, and a key of megabytes took minutes.
  CHECK(internal::Suggest(std::string(100, 'a'), {std::string(90, 'a')}).empty());
  CHECK(internal::Suggest(std::string(64, 'a'), {std::string(60, 'a')}) == std::string(60, 'a'));
  // Ignored with a warning, as any unknown key that is no likely typo, and shown shortened.
  Result<TrainConfig> long_key = ParseTrainConfig(Base(", \"" + std::string(1 << 20, 'k') + "\": 1"), "train.json", 2,
                                                  [](const std::string& p) -> Result<std::string> { return NotFoundError(p); });
  REQUIRE(long_key.ok());
  CHECK(long_key->warnings ==
        std::vector<std::string>{"train.json: $." + std::string(37, 'k') + "...: unknown key, ignored"});
}

TEST_CASE("A config larger than 16 MiB is refused without parsing it") {
  std::string huge = Base(", \"pad\": \"" + std::string(kMaxConfigBytes, 'x') + "\"");
  CHECK(ErrorOf(huge) == "train.json: " + std::to_string(huge.size()) +
                             " bytes; a config may have at most 16777216 (real ones are a few kilobytes)");
}

TEST_CASE("Absurd model and batch values are refused with their JSON path") {
  struct Case {
    std::string text;
    const char* message;
  };
  const std::string gpt = R"("type": "gpt", "n_head": 2, "n_embd": 32, )";
  const std::string model = R"("type": "gpt", "n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 16)";
  const std::string data = R"("train": "t.bin")";
  const Case cases[] = {
      // Before: std::bad_alloc (SIGABRT) while building the model.
      {Base("", gpt + R"("n_layer": 2, "block_size": 65537)"),
       "train.json: $.model.block_size: expected an integer 1-65536, got 65537"},
      {Base("", gpt + R"("n_layer": 4097, "block_size": 16)"),
       "train.json: $.model.n_layer: expected an integer 1-4096, got 4097"},
      {Base("", R"("type": "gpt", "n_layer": 1, "n_head": 1, "n_embd": 65537, "block_size": 16)"),
       "train.json: $.model.n_embd: expected an integer 1-65536, got 65537"},
      {Base("", model, data, R"("train_micro_batch_size_per_gpu": 1048577)"),
       "train.json: $.train_micro_batch_size_per_gpu: expected an integer 1-1048576, got 1048577"},
      {Base(R"(, "gradient_accumulation_steps": 1048577)"),
       "train.json: $.gradient_accumulation_steps: expected an integer 1-1048576, got 1048577"},
      {Base("", model, data, R"("train_batch_size": 1e15)"),
       "train.json: $.train_batch_size: gives a micro batch of 500000000000000 per rank, more than 1048576: set "
       "train_micro_batch_size_per_gpu"},
      {Base("", R"("type": "mlp", "layers": [)" + Repeat("2, ", 1025) + "2]", R"("format": "idx", "train": "i", "train_labels": "l")"),
       "train.json: $.model.layers: 1026 widths; at most 1025 (1024 layers)"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.message);
    CHECK(ErrorOf(c.text) == c.message);
  }
}

TEST_CASE("ResolveBatchSizes refuses products past 64 bits instead of wrapping around") {
  // Before: 2^62 x 4 x 4 wrapped to 0 and "train_batch_size 0" was accepted.
  Result<BatchConfig> r = ResolveBatchSizes(std::nullopt, int64_t{1} << 62, 4, 4);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "micro 4611686018427387904 x accumulation 4 x world 4 = (beyond 64-bit integers)");
  r = ResolveBatchSizes(std::numeric_limits<int64_t>::max(), int64_t{1} << 62, std::nullopt, 4);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "train_batch_size 9223372036854775807 is not a multiple of micro 4611686018427387904 x "
                                "world 4 = (beyond 64-bit integers)");
}

TEST_CASE("data.seq_len and data.format are checked against the model, with their JSON path") {
  const std::string mlp = R"("type": "mlp", "layers": [4, 2])";
  CHECK(ErrorOf(Base("", mlp, R"("format": "idx", "train": "i", "train_labels": "l", "seq_len": 8)")) ==
        "train.json: $.data.seq_len: only for \"format\": \"tokens\" (an image is one sample)");
  CHECK(ErrorOf(Base("", mlp, R"("train": "t.bin")")) ==
        "train.json: $.data.train: the mlp model reads images: set \"format\": \"idx\"");
  CHECK(ErrorOf(Base("", mlp, R"("format": "tokens", "train": "t.bin")")) ==
        "train.json: $.data.format: the mlp model reads images: set \"format\": \"idx\"");
  const std::string gpt = R"("type": "gpt", "n_layer": 1, "n_head": 1, "n_embd": 8, "block_size": 16)";
  CHECK(ErrorOf(Base("", gpt, R"("train": "t.bin", "seq_len": 0)")) ==
        "train.json: $.data.seq_len: expected an integer 1-16, got 0");
  CHECK(ErrorOf(Base("", gpt, R"("train": "t.bin", "seq_len": 1)")) == "OK");  // a bigram model
}

}  // namespace
}  // namespace dslaunch::runtime
