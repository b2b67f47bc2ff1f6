// A GptModel split into parts (pipeline stages, docs/parallelism.md "Stages") against the whole
// model: the same initial values, losses, parameter gradients and activations crossing each cut.
#include "runtime/models/gpt.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "tests/fakes/flat_parameter_access.h"
#include "tests/runtime/models/model_parts.h"

namespace dslaunch::runtime {
namespace {

using testing::ByName;
using testing::SameBits;
using testing::SmallBatch;

// 5 blocks, so that parts of 1, 2 and 2 blocks and a middle part exist; odd sizes everywhere.
GptConfig Small(int recompute = 0) {
  GptConfig config{5, 2, 8, 6, 13};
  config.recompute_blocks = recompute;
  return config;
}

TEST_CASE("A part's layout and initial values are the whole model's tensors of its blocks") {
  const GptConfig config = Small();
  GptModel whole(config, 2);
  std::vector<float> all(whole.layout().numel());
  whole.InitParameters(all, 1234);
  const auto expected = ByName(whole.layout(), all);
  for (GptPart part : {GptPart{0, 1}, GptPart{1, 3}, GptPart{3, -1}, GptPart{0, -1}}) {
    CAPTURE(part.first_block);
    CAPTURE(part.end_block);
    GptModel model(config, 2, part);
    std::vector<float> values(model.layout().numel());
    model.InitParameters(values, 1234);
    const auto got = ByName(model.layout(), values);
    for (const auto& [name, v] : got) {
      CAPTURE(name);
      CHECK(SameBits(v, expected.at(name)));
    }
    // Its groups: the embeddings only with the first block, ln_f only with the last.
    const std::vector<double> sizes = GptModel::GroupSizes(config, part);
    REQUIRE(sizes.size() == model.layout().groups().size());
    for (size_t g = 0; g < sizes.size(); ++g) CHECK(sizes[g] == static_cast<double>(model.layout().groups()[g].numel));
    CHECK(model.layout().groups().front().name == (part.first_block == 0 ? "embeddings" : "h." + std::to_string(part.first_block)));
    CHECK(model.layout().groups().back().name == (part.end_block == -1 ? "ln_f" : "h." + std::to_string(part.end_block - 1)));
    CHECK(static_cast<double>(model.activation_bytes()) == GptModel::ActivationBytes(config, 2, part));
  }
  CHECK(GptModel::ActivationBytes(config, 2) == GptModel::ActivationBytes(config, 2, GptPart{0, 5}));
}

// Runs the whole model and the parts [0, 2), [2, 3), [3, 5) on one batch with the same values and
// compares everything that crosses a cut and every gradient.
void CheckPartsMatchWhole(int recompute) {
  const GptConfig config = Small(recompute);
  const SmallBatch batch;
  const float scale = 8.0f;
  GptModel whole(config, batch.b);
  std::vector<float> all(whole.layout().numel()), all_grad(whole.layout().numel(), 0.0f);
  whole.InitParameters(all, 99);
  dslaunch::testing::FlatParameterAccess whole_access(whole.layout(), all, all_grad);
  const float whole_loss = whole.Forward(whole_access, batch.tokens.data(), batch.targets.data(), batch.b, batch.t);
  whole.Backward(whole_access, scale);
  const auto want_grad = ByName(whole.layout(), all_grad);

  const GptPart parts[] = {{0, 2}, {2, 3}, {3, 5}};
  std::vector<GptModel> models;
  std::vector<std::vector<float>> values, grads;
  for (GptPart part : parts) {
    models.emplace_back(config, batch.b, part);
    values.emplace_back(models.back().layout().numel());
    grads.emplace_back(models.back().layout().numel(), 0.0f);
    models.back().InitParameters(values.back(), 99);
  }
  std::vector<dslaunch::testing::FlatParameterAccess> access;
  for (int p = 0; p < 3; ++p) access.emplace_back(models[p].layout(), values[p], grads[p]);
  // The last part reads wte where the first part keeps it, and adds its gradient apart.
  const size_t wte = static_cast<size_t>(config.vocab_size) * config.n_embd;
  std::vector<float> head_weight(values[0].begin(), values[0].begin() + wte), head_grad(wte, 0.0f);
  models[2].SetTiedHead(head_weight, head_grad);

  std::vector<float> activation;
  float loss = 0;
  for (int p = 0; p < 3; ++p) {
    loss = models[p].ForwardPart(access[p], batch.tokens.data(), activation.data(), batch.targets.data(), batch.b,
                                 batch.t);
    if (p < 2) activation.assign(models[p].output().begin(), models[p].output().end());
  }
  CHECK(std::memcmp(&loss, &whole_loss, sizeof(float)) == 0);
  std::vector<float> gradient;
  for (int p = 2; p >= 0; --p) {
    models[p].BackwardPart(access[p], scale, gradient.data());
    if (p > 0) gradient.assign(models[p].input_gradient().begin(), models[p].input_gradient().end());
  }
  // Every gradient but wte's is the whole model's to the bit: the same kernels on the same inputs.
  std::map<std::string, std::vector<float>> got;
  for (int p = 0; p < 3; ++p) {
    for (auto& [name, v] : ByName(models[p].layout(), grads[p])) got[name] = v;
    CHECK(access[p].ready().size() == models[p].layout().groups().size());
  }
  for (const auto& [name, want] : want_grad) {
    CAPTURE(name);
    if (name == "wte.weight") continue;
    CHECK(SameBits(got.at(name), want));
  }
  // wte's: the embedding's part on the first stage plus the head's on the last, the two terms of
  // the whole model's sum added in another order (docs/parallelism.md, "Tied embeddings").
  const std::vector<float>& want = want_grad.at("wte.weight");
  const std::vector<float>& first = got.at("wte.weight");
  for (size_t i = 0; i < wte; ++i) {
    CAPTURE(i);
    CHECK(first[i] + head_grad[i] == doctest::Approx(want[i]).epsilon(1e-6).scale(1e-6));
  }
}

TEST_CASE("Parts run one after another give the whole model's loss and gradients") {
  CheckPartsMatchWhole(0);
}

TEST_CASE("Parts with recomputed blocks recompute the model's first blocks, with the same results") {
  CheckPartsMatchWhole(3);  // blocks 0-2: all of the first part, the second part's one block
  CHECK(GptModel::BlockSlots(Small(3), GptPart{0, 2}) == 1);
  CHECK(GptModel::BlockSlots(Small(3), GptPart{2, 3}) == 1);
  CHECK(GptModel::BlockSlots(Small(3), GptPart{3, 5}) == 2);
}

}  // namespace
}  // namespace dslaunch::runtime
