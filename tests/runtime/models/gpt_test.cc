#include "runtime/models/gpt.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "runtime/core/random.h"
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

// The initialisation as gpt.h defines it, written out sequentially: one splitmix64 stream over the
// tensors in layout order, Box-Muller pairs for the normal ones (a pair per two values, the last
// sine unused when the count is odd), nothing drawn for biases and layer norms.
std::vector<float> SequentialGptInit(const GptModel& model, uint64_t seed) {
  std::vector<float> out(model.layout().numel());
  uint64_t state = seed;
  const float proj = 0.02f / std::sqrt(2.0f * static_cast<float>(model.config().n_layer));
  for (const auto& g : model.layout().groups()) {
    for (const auto& t : g.tensors) {
      float* p = out.data() + t.offset;
      const bool weight = t.name.ends_with(".weight");
      if (t.name.find("ln_") != std::string::npos || !weight) {
        std::fill(p, p + t.numel, weight ? 1.0f : 0.0f);
        continue;
      }
      const float stddev = t.name == "wpe.weight" ? 0.01f : t.name.ends_with("c_proj.weight") ? proj : 0.02f;
      for (size_t i = 0; i < t.numel; i += 2) {
        const double u1 = (static_cast<double>(SplitMix64(state) >> 11) + 0.5) / 9007199254740992.0;
        const double u2 = (static_cast<double>(SplitMix64(state) >> 11) + 0.5) / 9007199254740992.0;
        const double r = std::sqrt(-2.0 * std::log(u1));
        p[i] = static_cast<float>(r * std::cos(6.283185307179586 * u2)) * stddev;
        if (i + 1 < t.numel) p[i + 1] = static_cast<float>(r * std::sin(6.283185307179586 * u2)) * stddev;
      }
    }
  }
  return out;
}

TEST_CASE("GPT InitParameters is the sequential stream of its definition, tensors of odd sizes included") {
  GptModel model(GptConfig{2, 3, 9, 4, 11}, 1);  // wte 11x9 = 99 values: odd
  std::vector<float> got(model.layout().numel());
  model.InitParameters(got, 1337);
  const std::vector<float> want = SequentialGptInit(model, 1337);
  REQUIRE(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
}

TEST_CASE("GPT InitRange gives the whole initialisation's values for any range") {
  GptModel model(GptConfig{2, 3, 9, 4, 11}, 1);  // tensors of odd sizes: pairs that straddle them
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
