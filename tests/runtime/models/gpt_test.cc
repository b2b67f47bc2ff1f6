#include "runtime/models/gpt.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "tests/fakes/flat_parameter_access.h"

namespace dslaunch::runtime {
namespace {

GptConfig Tiny() { return GptConfig{2, 2, 8, 4, 11}; }

TEST_CASE("The GPT layout groups embeddings, blocks and the final norm with Hugging Face names") {
  GptModel model(Tiny(), 2);
  const auto& layout = model.layout();
  REQUIRE(layout.groups().size() == 4);
  CHECK(layout.groups()[0].name == "embeddings");
  CHECK(layout.groups()[1].name == "h.0");
  CHECK(layout.groups()[3].name == "ln_f");
  const size_t c = 8, v = 11, t = 4;
  const size_t block = 2 * c + 3 * c * c + 3 * c + c * c + c + 2 * c + 4 * c * c + 4 * c + 4 * c * c + c;
  CHECK(layout.numel() == v * c + t * c + 2 * block + 2 * c);
  const TensorInfo* attn = layout.Find("h.1.attn.c_attn.weight");
  REQUIRE(attn != nullptr);
  CHECK(attn->shape == std::vector<int>{24, 8});
  CHECK_FALSE(layout.Find("h.1.ln_2.bias")->decay);
}

TEST_CASE("GPT InitRange gives the whole initialisation's values for any range") {
  GptModel model(GptConfig{2, 2, 8, 4, 11}, 1);
  const size_t n = model.layout().numel();
  std::vector<float> whole(n);
  model.InitParameters(whole, 1337);
  // Ranges that start and end at odd and even places, inside one tensor and across several, at
  // the ends of the model, and empty.
  const std::vector<std::pair<size_t, size_t>> ranges = {
      {0, n}, {0, 1}, {1, 2}, {1, 4}, {87, 88}, {87, 131}, {88, 300}, {n - 1, n}, {n - 17, n}, {5, 5}, {n, n}};
  for (const auto& [begin, end] : ranges) {
    CAPTURE(begin);
    CAPTURE(end);
    std::vector<float> part(end - begin, -7.0f);
    model.InitRange(begin, part, 1337);
    CHECK(std::equal(part.begin(), part.end(), whole.begin() + static_cast<std::ptrdiff_t>(begin)));
  }
  // Every value, read one at a time in reverse.
  for (size_t i = n; i-- > 0;) {
    float one = -7.0f;
    model.InitRange(i, std::span<float>(&one, 1), 1337);
    REQUIRE(std::memcmp(&one, &whole[i], sizeof(float)) == 0);
  }
}

TEST_CASE("GPT backward matches finite differences of the mean loss for every parameter") {
  GptModel model(Tiny(), 2);
  std::vector<float> params(model.layout().numel()), grads(params.size(), 0.0f);
  model.InitParameters(params, 42);
  // Larger than GPT-2's init so every path carries signal the differences can see.
  for (auto& p : params) p *= 4.0f;
  std::vector<int> tokens = {1, 5, 2, 9, 10, 0, 3, 3}, targets = {5, 2, 9, 4, 0, 3, 3, 7};
  testing::FlatParameterAccess access(model.layout(), params, grads);
  model.Forward(access, tokens.data(), targets.data(), 2, 4);
  model.Backward(access, 1.0f);
  CHECK(access.ready() == std::vector<int>{3, 2, 1, 0});

  constexpr float kEps = 1e-3f;
  int bad = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const float saved = params[i];
    params[i] = saved + kEps;
    double plus = model.Forward(access, tokens.data(), targets.data(), 2, 4);
    params[i] = saved - kEps;
    double minus = model.Forward(access, tokens.data(), targets.data(), 2, 4);
    params[i] = saved;
    double numeric = (plus - minus) / (2.0 * kEps);
    // fp32 forward: the loss is O(1), so the difference quotient carries ~1e-7/1e-3 = 1e-4 noise.
    if (std::abs(numeric - grads[i]) > 3e-3 + 3e-2 * std::abs(numeric)) {
      ++bad;
      CAPTURE(i);
      CAPTURE(numeric);
      CAPTURE(grads[i]);
      CHECK(bad == 0);
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("Backward scales gradients by the loss scale and accumulates across calls") {
  GptModel model(Tiny(), 1);
  std::vector<float> params(model.layout().numel()), g1(params.size(), 0.0f), g2(params.size(), 0.0f);
  model.InitParameters(params, 1);
  std::vector<int> tokens = {1, 2, 3, 4}, targets = {2, 3, 4, 5};
  testing::FlatParameterAccess a1(model.layout(), params, g1), a2(model.layout(), params, g2);
  model.Forward(a1, tokens.data(), targets.data(), 1, 4);
  model.Backward(a1, 1.0f);
  model.Forward(a2, tokens.data(), targets.data(), 1, 4);
  model.Backward(a2, 128.0f);
  model.Forward(a2, tokens.data(), targets.data(), 1, 4);
  model.Backward(a2, 128.0f);
  for (size_t i = 0; i < params.size(); i += 7) CHECK(g2[i] == doctest::Approx(256.0f * g1[i]).epsilon(1e-4));
  // An untrained model predicts about uniformly: the loss is near log(vocab).
  CHECK(model.Forward(a1, tokens.data(), targets.data(), 1, 4) == doctest::Approx(std::log(11.0)).epsilon(0.05));
}

TEST_CASE("ValidateGptConfig names the train.json key of a bound or divisibility violation") {
  struct Case {
    GptConfig config;
    const char* message;
  };
  const Case cases[] = {
      {{0, 2, 8, 4, 11}, "model.n_layer: must be in [1, 4096], got 0"},
      {{2, 0, 8, 4, 11}, "model.n_head: must be in [1, 65536], got 0"},
      {{2, 2, 65537, 4, 11}, "model.n_embd: must be in [1, 65536], got 65537"},
      {{2, 2, 8, 65537, 11}, "model.block_size: must be in [1, 65536], got 65537"},
      {{2, 2, 8, 4, 0}, "model.vocab_size: must be in [1, 65536], got 0"},
      {{2, 3, 8, 4, 11}, "model.n_embd: 8 is not divisible by n_head 3"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.message);
    const Status status = ValidateGptConfig(c.config);
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK(status.message() == c.message);
  }
  CHECK(ValidateGptConfig(Tiny()).ok());
}

}  // namespace
}  // namespace dslaunch::runtime
