// A GptModel split over tensor ranks (docs/parallelism.md, "Tensor parallelism") against the whole
// model: each rank's tensors are its slices of the whole model's, and t ranks run together (one
// thread each, their sums over the in-process communicator) give the whole model's loss and, slice
// by slice, its gradients, within fp32 reassociation.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "runtime/core/partition.h"
#include "runtime/models/gpt.h"
#include "runtime/train/communicator_tensor_group.h"
#include "tests/fakes/flat_parameter_access.h"
#include "tests/runtime/models/model_parts.h"
#include "tests/fakes/thread_communicator.h"

namespace dslaunch::runtime {
namespace {

using testing::ByName;
using testing::SameBits;
using testing::SmallBatch;

// 4 heads (splits of 2 and 4), a vocabulary of 13 (uneven rows: 4, 3, 3, 3 on four ranks).
GptConfig Small(int recompute = 0) {
  GptConfig config{3, 4, 8, 6, 13};
  config.recompute_blocks = recompute;
  return config;
}

using Tensors = std::map<std::string, std::vector<float>>;

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Rows [from, to) of a [*][cols] tensor.
std::vector<float> Rows(const std::vector<float>& w, size_t from, size_t to, size_t cols) {
  return {w.begin() + static_cast<std::ptrdiff_t>(from * cols), w.begin() + static_cast<std::ptrdiff_t>(to * cols)};
}
// Columns [from, to) of a [*][cols] tensor.
std::vector<float> Columns(const std::vector<float>& w, size_t from, size_t to, size_t cols) {
  std::vector<float> out;
  for (size_t row = 0; row < w.size() / cols; ++row) {
    out.insert(out.end(), w.begin() + static_cast<std::ptrdiff_t>(row * cols + from),
               w.begin() + static_cast<std::ptrdiff_t>(row * cols + to));
  }
  return out;
}

// Tensor rank r's share of the whole model's tensor `name` (Megatron-LM's split, written out here
// apart from the model's own slicing): c_attn's rows of its heads in each of q, k and v; c_fc's
// rows of its units; the two c_proj's columns; wte's rows of the vocabulary; the rest whole.
std::vector<float> ShareOf(const GptConfig& config, const std::string& name, const std::vector<float>& whole, int t,
                           int r) {
  const size_t c = config.n_embd, a = c / t, m = 4 * c / t, ra = r * a, rm = r * m;
  if (name == "wte.weight") {
    const ShardRange rows = ShardFor(config.vocab_size, t, r);
    return Rows(whole, rows.begin, rows.end, c);
  }
  const size_t cols = EndsWith(name, ".weight") ? c : 1;
  if (EndsWith(name, "attn.c_attn.weight") || EndsWith(name, "attn.c_attn.bias")) {
    std::vector<float> out;
    for (size_t part = 0; part < 3; ++part) {
      const std::vector<float> rows = Rows(whole, part * c + ra, part * c + ra + a, cols);
      out.insert(out.end(), rows.begin(), rows.end());
    }
    return out;
  }
  if (EndsWith(name, "mlp.c_fc.weight") || EndsWith(name, "mlp.c_fc.bias")) return Rows(whole, rm, rm + m, cols);
  if (EndsWith(name, "attn.c_proj.weight")) return Columns(whole, ra, ra + a, c);
  if (EndsWith(name, "mlp.c_proj.weight")) return Columns(whole, rm, rm + m, 4 * c);
  return whole;
}

bool Split(const std::string& name) {
  return name == "wte.weight" || EndsWith(name, "c_attn.weight") || EndsWith(name, "c_attn.bias") ||
         EndsWith(name, "c_proj.weight") || EndsWith(name, "c_fc.weight") || EndsWith(name, "c_fc.bias");
}

// Norm-wise: ||got - want|| <= tolerance x ||want||. Reassociated sums differ by a few roundings
// of their terms, which can be large next to a small result, so element-wise relative errors of
// near-zero gradients say little.
void CheckClose(const std::vector<float>& got, const std::vector<float>& want, double tolerance) {
  REQUIRE(got.size() == want.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  CAPTURE(std::sqrt(diff / norm));
  CHECK(std::sqrt(diff) <= tolerance * std::sqrt(norm));
}

TEST_CASE("A tensor rank's tensors are its slices of the whole model's, and its sizes follow the formulas") {
  const GptConfig config = Small();
  GptModel whole(config, 2);
  std::vector<float> all(whole.layout().numel());
  whole.InitParameters(all, 77);
  const Tensors expected = ByName(whole.layout(), all);
  for (int t : {2, 4}) {
    for (int r = 0; r < t; ++r) {
      for (GptPart part : {GptPart{0, -1, r, t}, GptPart{1, 2, r, t}}) {
        CAPTURE(t);
        CAPTURE(r);
        CAPTURE(part.first_block);
        GptModel model(config, 2, part);
        std::vector<float> values(model.layout().numel());
        model.InitParameters(values, 77);
        for (const auto& [name, v] : ByName(model.layout(), values)) {
          CAPTURE(name);
          CHECK(SameBits(v, ShareOf(config, name, expected.at(name), t, r)));
        }
        // The same values a range at a time, from odd places.
        for (size_t begin : {size_t{0}, size_t{5}, model.layout().numel() / 3}) {
          std::vector<float> range(model.layout().numel() - begin);
          model.InitRange(begin, range, 77);
          CHECK(std::equal(range.begin(), range.end(), values.begin() + static_cast<std::ptrdiff_t>(begin)));
        }
        const std::vector<double> sizes = GptModel::GroupSizes(config, part);
        REQUIRE(sizes.size() == model.layout().groups().size());
        for (size_t g = 0; g < sizes.size(); ++g) CHECK(sizes[g] == static_cast<double>(model.layout().groups()[g].numel));
        CHECK(static_cast<double>(model.activation_bytes()) == GptModel::ActivationBytes(config, 2, part));
        // The whole tensors, and only they, are in ReplicatedRanges.
        for (const auto& g : model.layout().groups()) {
          for (const auto& tensor : g.tensors) {
            CAPTURE(tensor.name);
            bool covered = false;
            for (const ShardRange& range : model.ReplicatedRanges()) {
              covered |= range.begin <= tensor.offset && tensor.offset + tensor.numel <= range.end;
            }
            CHECK(covered == !Split(tensor.name));
          }
        }
        CHECK(model.vocab_begin() == static_cast<int>(ShardFor(13, t, r).begin));
        // Its place in the whole model: the whole values at its pieces are its own, in its order.
        std::vector<float> placed;
        ForEachRun(model.WholePieces(), [&](uint64_t begin, uint64_t count) {
          placed.insert(placed.end(), all.begin() + static_cast<std::ptrdiff_t>(begin),
                        all.begin() + static_cast<std::ptrdiff_t>(begin + count));
        });
        CHECK(SameBits(placed, values));
      }
    }
  }
  CHECK(GptModel(config, 2).ReplicatedRanges().empty());
  CHECK_FALSE(ValidateGptTensorSplit(config, 3).ok());
  CHECK(ValidateGptTensorSplit(config, 3).message() ==
        "tensor_parallel.autotp_size: 3 tensor ranks cannot share model.n_head 4 heads evenly; choose a size that "
        "divides n_head");
  CHECK_FALSE(ValidateGptTensorSplit(GptConfig{1, 4, 8, 6, 3}, 4).ok());
  CHECK(ValidateGptTensorSplit(config, 4).ok());
}

// The whole model and t tensor ranks on one batch, forward and backward twice (accumulating):
// losses and every gradient compared slice by slice.
void CheckSplitMatchesWhole(int t, int recompute) {
  CAPTURE(t);
  CAPTURE(recompute);
  const GptConfig config = Small(recompute);
  const SmallBatch batch;
  const float scale = 4.0f;
  GptModel whole(config, batch.b);
  std::vector<float> all(whole.layout().numel()), all_grad(whole.layout().numel(), 0.0f);
  whole.InitParameters(all, 5);
  dslaunch::testing::FlatParameterAccess whole_access(whole.layout(), all, all_grad);
  std::vector<float> whole_losses;
  for (int pass = 0; pass < 2; ++pass) {
    whole_losses.push_back(whole.Forward(whole_access, batch.tokens.data(), batch.targets.data(), batch.b, batch.t));
    whole.Backward(whole_access, scale);
  }
  const Tensors want_grad = ByName(whole.layout(), all_grad);

  testing::ThreadCommunicatorGroup group(t);
  std::vector<std::vector<float>> losses(t), grads(t), logits(t);
  std::vector<Tensors> rank_grads(t);
  std::vector<Status> statuses(t);
  std::vector<std::thread> threads;
  for (int r = 0; r < t; ++r) {
    threads.emplace_back([&, r] {
      CommunicatorTensorGroup tensor_group(group.Get(r));
      GptModel model(config, batch.b, GptPart{0, -1, r, t});
      model.SetTensorGroup(tensor_group);
      std::vector<float> values(model.layout().numel());
      grads[r].assign(model.layout().numel(), 0.0f);
      model.InitParameters(values, 5);
      dslaunch::testing::FlatParameterAccess access(model.layout(), values, grads[r]);
      for (int pass = 0; pass < 2; ++pass) {
        losses[r].push_back(model.ForwardPart(access, batch.tokens.data(), nullptr, batch.targets.data(), batch.b,
                                              batch.t));
        model.BackwardPart(access, scale, nullptr);
      }
      logits[r].assign(model.logits().begin(), model.logits().end());
      rank_grads[r] = ByName(model.layout(), grads[r]);
      statuses[r] = model.status();
    });
  }
  for (auto& thread : threads) thread.join();
  const Tensors whole_logits{{"logits", std::vector<float>(whole.logits().begin(), whole.logits().end())}};
  for (int r = 0; r < t; ++r) {
    CAPTURE(r);
    REQUIRE(statuses[r].ok());
    // The loss is the same number on every rank: each row's loss is summed over the group.
    CHECK(SameBits(losses[r], losses[0]));
    for (int pass = 0; pass < 2; ++pass) CHECK(losses[r][pass] == doctest::Approx(whole_losses[pass]).epsilon(1e-6));
    // The rank's logits are its columns of the whole model's.
    const ShardRange rows = ShardFor(config.vocab_size, t, r);
    CheckClose(logits[r], Columns(whole_logits.at("logits"), rows.begin, rows.end, config.vocab_size), 1e-5f);
    for (const auto& [name, got] : rank_grads[r]) {
      CAPTURE(name);
      CheckClose(got, ShareOf(config, name, want_grad.at(name), t, r), 1e-5);
      // A whole tensor's gradient is the same bits on every rank: the group's sums are.
      if (!Split(name)) CHECK(SameBits(got, rank_grads[0].at(name)));
    }
  }
}

TEST_CASE("The parts of any grid, whole tensors counted on the first tensor rank only, place every element of the "
          "whole model once") {
  const GptConfig config = Small();
  const size_t numel = GptModel(config, 2).layout().numel();
  CHECK(GptModel(config, 0).layout().numel() == numel);  // a model for its layout only
  CHECK(GptModel(config, 0).WholePieces() == std::vector<WholePiece>{{0, 0, numel, 1}});
  for (int t : {1, 2, 4}) {
    for (const std::vector<int>& bounds : {std::vector<int>{0, 3}, {0, 1, 3}, {0, 1, 2, 3}}) {
      CAPTURE(t);
      CAPTURE(bounds.size());
      std::vector<int> seen(numel, 0);
      for (size_t s = 0; s + 1 < bounds.size(); ++s) {
        for (int r = 0; r < t; ++r) {
          const GptModel part(config, 0, GptPart{bounds[s], bounds[s + 1], r, t});
          const std::vector<ShardRange> skip = r == 0 ? std::vector<ShardRange>{} : part.ReplicatedRanges();
          for (const ShardRange& kept : Without({0, part.layout().numel()}, skip)) {
            ForEachRun(PiecesOf(part.WholePieces(), kept), [&](uint64_t begin, uint64_t count) {
              for (uint64_t i = begin; i < begin + count; ++i) ++seen[i];
            });
          }
        }
      }
      CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<std::ptrdiff_t>(numel));
    }
  }
}

TEST_CASE("Tensor ranks together give the whole model's loss, logits and gradients within fp32 reassociation") {
  CheckSplitMatchesWhole(2, 0);
  CheckSplitMatchesWhole(4, 0);
}

TEST_CASE("Tensor ranks with recomputed blocks give the same results") {
  CheckSplitMatchesWhole(2, 2);
}

TEST_CASE("A tensor rank whose peer is gone keeps the group's failure") {
  testing::ThreadCommunicatorGroup group(2, std::chrono::milliseconds(200));
  const GptConfig config = Small();
  const SmallBatch batch;
  CommunicatorTensorGroup tensor_group(group.Get(0));
  GptModel model(config, batch.b, GptPart{0, -1, 0, 2});
  model.SetTensorGroup(tensor_group);
  std::vector<float> values(model.layout().numel()), grads(model.layout().numel());
  model.InitParameters(values, 5);
  dslaunch::testing::FlatParameterAccess access(model.layout(), values, grads);
  model.ForwardPart(access, batch.tokens.data(), nullptr, batch.targets.data(), batch.b, batch.t);
  CHECK(model.status().code() == StatusCode::kAborted);
  CHECK(model.status().message().find("tensor-parallel sum") != std::string::npos);
}

}  // namespace
}  // namespace dslaunch::runtime
