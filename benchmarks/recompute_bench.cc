// dslaunch-recompute-bench: the gpt model's forward + backward with and without activation
// checkpointing (docs/engine.md, "Recomputation"), one variant per process so that each has its
// own peak RSS. scripts/bench-recompute.sh runs it once per variant and compares.
//
//   dslaunch-recompute-bench --n_layer L --n_head H --n_embd C --block_size T --micro B
//                            [--recompute K] [--steps S]
//
// Builds the model (fp32 parameters in one flat buffer, GPT-2's initialisation, seed 1), runs one
// warm-up micro-step (it faults in every page), then S timed micro-steps of Forward + Backward on
// fixed pseudo-random tokens, and prints one JSON line (ms_per_step: the fastest micro-step, since
// on a shared machine other tenants only ever slow one down):
//   {"recompute_blocks": K, "activation_bytes": ..., "activation_formula": ..., "ms_per_step": ...,
//    "peak_rss_bytes": ..., "loss": ..., "gradient_fnv1a": "..."}
// activation_bytes is the model's own accounting (its buffers), activation_formula
// GptModel::ActivationBytes; the program fails if they differ. gradient_fnv1a hashes the bits of
// the accumulated gradient, so the script can check that the variants computed the same thing.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "runtime/models/gpt.h"

namespace {

using dslaunch::runtime::GptConfig;
using dslaunch::runtime::GptModel;

// The whole parameter and gradient buffers, handed out group by group (what ZeRO stage 0 with fp32
// storage does, without the engine's bookkeeping).
class FlatAccess final : public dslaunch::runtime::ParameterAccess {
 public:
  FlatAccess(const dslaunch::runtime::ParameterLayout& layout, std::vector<float>& params, std::vector<float>& grads)
      : layout_(layout), params_(params), grads_(grads) {}
  std::span<const float> Acquire(int group) override {
    const auto& g = layout_.groups()[group];
    return {params_.data() + g.offset, g.numel};
  }
  void Release(int) override {}
  std::span<float> Gradient(int group) override {
    const auto& g = layout_.groups()[group];
    return {grads_.data() + g.offset, g.numel};
  }
  void GradientReady(int) override {}

 private:
  const dslaunch::runtime::ParameterLayout& layout_;
  std::vector<float>& params_;
  std::vector<float>& grads_;
};

// VmHWM of this process from /proc/self/status, in bytes (0 when unreadable).
double PeakRssBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) * 1024.0;  // the value is in kB
  }
  return 0;
}

uint64_t Fnv1a(const std::vector<float>& values) {
  uint64_t h = 1469598103934665603ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t i = 0; i < values.size() * sizeof(float); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpt forward + backward with and without activation checkpointing"};
  GptConfig config;
  config.vocab_size = 256;
  int micro = 0, steps = 5;
  app.add_option("--n_layer", config.n_layer)->required()->check(CLI::PositiveNumber);
  app.add_option("--n_head", config.n_head)->required()->check(CLI::PositiveNumber);
  app.add_option("--n_embd", config.n_embd)->required()->check(CLI::PositiveNumber);
  app.add_option("--block_size", config.block_size)->required()->check(CLI::PositiveNumber);
  app.add_option("--micro", micro, "sequences per micro-step")->required()->check(CLI::PositiveNumber);
  app.add_option("--recompute", config.recompute_blocks, "blocks recomputed, from the first (0 = none)");
  app.add_option("--steps", steps, "timed micro-steps")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (config.n_embd % config.n_head != 0 || config.recompute_blocks < 0 ||
      config.recompute_blocks > config.n_layer) {
    std::fprintf(stderr, "dslaunch-recompute-bench: n_embd must divide by n_head, 0 <= recompute <= n_layer\n");
    return 2;
  }

  GptModel model(config, micro);
  const double formula = GptModel::ActivationBytes(config, micro);
  if (static_cast<double>(model.activation_bytes()) != formula) {
    std::fprintf(stderr, "dslaunch-recompute-bench: buffers %zu bytes != formula %.0f\n", model.activation_bytes(),
                 formula);
    return 1;
  }
  std::vector<float> params(model.layout().numel()), grads(params.size(), 0.0f);
  model.InitParameters(params, 1);
  FlatAccess access(model.layout(), params, grads);
  const size_t n = static_cast<size_t>(micro) * config.block_size;
  std::vector<int> tokens(n), targets(n);
  uint64_t x = 88172645463325252ull;  // xorshift64: fixed tokens, the same in every variant
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    tokens[i] = static_cast<int>(x % 256);
    targets[i] = static_cast<int>((x >> 8) % 256);
  }

  float loss = model.Forward(access, tokens.data(), targets.data(), micro, config.block_size);  // warm-up
  model.Backward(access, 1.0f);
  double best_ms = 0;
  for (int s = 0; s < steps; ++s) {
    const auto start = std::chrono::steady_clock::now();
    loss = model.Forward(access, tokens.data(), targets.data(), micro, config.block_size);
    model.Backward(access, 1.0f);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    best_ms = s == 0 ? ms : std::min(best_ms, ms);
  }
  std::printf(
      "{\"recompute_blocks\": %d, \"activation_bytes\": %zu, \"activation_formula\": %.0f, \"ms_per_step\": %.3f, "
      "\"peak_rss_bytes\": %.0f, \"loss\": %.9g, \"gradient_fnv1a\": \"%016" PRIx64 "\"}\n",
      config.recompute_blocks, model.activation_bytes(), formula, best_ms, PeakRssBytes(), loss, Fnv1a(grads));
  return 0;
}
