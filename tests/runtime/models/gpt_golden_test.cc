// A whole tiny GPT-2 forward pass against golden logits and loss from an independent float64
// implementation (tests/runtime/models/golden/make_golden.py, PyTorch; it shares no code with the
// runtime). The golden file holds the parameters, tokens, targets and expected outputs
// (tests/runtime/models/golden/tiny_gpt2.safetensors); torch is not needed to run this test.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/checkpoint/safetensors.h"
#include "runtime/models/gpt.h"
#include "tests/fakes/flat_parameter_access.h"

namespace dslaunch::runtime {
namespace {

const std::string kGoldenPath = std::string(DSLAUNCH_SOURCE_DIR) + "/tests/runtime/models/golden/tiny_gpt2.safetensors";

// Logits and loss are O(1) (logits within [-2.8, 3.9]); the same model in float32 PyTorch is
// within 5e-7 of the float64 reference (make_golden.py prints it), the runtime's fp32 kernels
// (SimdExp, sgemm) within a few times that. 1e-5 leaves that margin and stays far below what a
// wrong constant does: GELU's 0.044715 -> 0 moves the logits by up to 0.037 (the loss by 4.9e-5),
// layer-norm epsilon 1e-5 -> 1e-1 by up to 0.34.
constexpr double kLogitTolerance = 1e-5;
constexpr double kLossTolerance = 1e-5;

// The tensor `name` of the golden file as a vector of T, checked to be `dtype` with `count`
// elements.
template <class T>
std::vector<T> ReadTensor(const SafetensorsFile& file, const std::string& name, const std::string& dtype,
                          size_t count) {
  const SafetensorsTensor* t = file.Find(name);
  REQUIRE_MESSAGE(t != nullptr, name);
  REQUIRE_MESSAGE(t->dtype == dtype, name);
  REQUIRE_MESSAGE(t->bytes() == count * sizeof(T), name);
  std::vector<T> out(count);
  const Status read = file.Read(*t, 0, out.data(), t->bytes());
  REQUIRE_MESSAGE(read.ok(), read.ToString());
  return out;
}

int MetaInt(const SafetensorsFile& file, const std::string& key) {
  const auto it = file.metadata().find(key);
  REQUIRE_MESSAGE(it != file.metadata().end(), key);
  return std::stoi(it->second);
}

TEST_CASE("A tiny GPT-2's logits and loss match an independent float64 implementation") {
  Result<SafetensorsFile> opened = SafetensorsFile::Open(kGoldenPath);
  REQUIRE_MESSAGE(opened.ok(), opened.status().ToString());
  const SafetensorsFile& file = *opened;
  const GptConfig config{MetaInt(file, "n_layer"), MetaInt(file, "n_head"), MetaInt(file, "n_embd"),
                         MetaInt(file, "block_size"), MetaInt(file, "vocab_size")};
  const int b = MetaInt(file, "batch"), t = MetaInt(file, "seq_len");
  // The script's model: two layers of two heads, and fewer positions than the block.
  CHECK(config.n_layer == 2);
  CHECK(config.n_head == 2);
  CHECK(t < config.block_size);

  GptModel model(config, b);
  const ParameterLayout& layout = model.layout();
  std::vector<float> params(layout.numel(), std::nanf("")), grads(layout.numel(), 0.0f);
  size_t tensors = 0;
  for (const ParameterGroup& group : layout.groups()) {
    for (const TensorInfo& info : group.tensors) {
      const SafetensorsTensor* st = file.Find(info.name);
      REQUIRE_MESSAGE(st != nullptr, info.name);
      CHECK_MESSAGE(st->shape == std::vector<int64_t>(info.shape.begin(), info.shape.end()), info.name);
      const std::vector<float> values = ReadTensor<float>(file, info.name, "F32", info.numel);
      std::copy(values.begin(), values.end(), params.begin() + static_cast<std::ptrdiff_t>(info.offset));
      ++tensors;
    }
  }
  // Every parameter came from the file, and the file holds nothing but them and the four others.
  CHECK(tensors + 4 == file.tensors().size());
  for (float p : params) REQUIRE(std::isfinite(p));

  const size_t n = static_cast<size_t>(b) * t, v = static_cast<size_t>(config.vocab_size);
  const std::vector<int32_t> tokens = ReadTensor<int32_t>(file, "tokens", "I32", n);
  const std::vector<int32_t> targets = ReadTensor<int32_t>(file, "targets", "I32", n);
  const std::vector<double> logits = ReadTensor<double>(file, "logits", "F64", n * v);
  const double loss = ReadTensor<double>(file, "loss", "F64", 1)[0];

  testing::FlatParameterAccess access(layout, params, grads);
  const float got_loss = model.Forward(access, tokens.data(), targets.data(), b, t);
  CHECK(std::abs(got_loss - loss) <= kLossTolerance);
  std::span<const float> got = model.logits();
  REQUIRE(got.size() >= n * v);
  double worst = 0.0;
  for (size_t i = 0; i < n * v; ++i) worst = std::max(worst, std::abs(got[i] - logits[i]));
  CAPTURE(got_loss);
  CAPTURE(loss);
  CHECK(worst <= kLogitTolerance);
  MESSAGE("largest logit difference from the float64 reference: ", worst);
}

}  // namespace
}  // namespace dslaunch::runtime
