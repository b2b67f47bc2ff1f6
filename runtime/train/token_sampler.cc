#include "runtime/train/token_sampler.h"

#include <algorithm>
#include <cmath>

namespace dslaunch::runtime {

TokenSampler::TokenSampler(uint64_t seed) : state_(seed ^ 0x5a5a5a5a5a5a5a5aull) {}

int TokenSampler::Draw(std::span<const float> logits) {
  const int vocab = static_cast<int>(logits.size());
  p_.resize(logits.size());
  const float mx = *std::max_element(logits.begin(), logits.end());
  double total = 0.0;
  for (int v = 0; v < vocab; ++v) total += p_[static_cast<size_t>(v)] = std::exp(static_cast<double>(logits[v] - mx));
  state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
  double r = static_cast<double>(state_ >> 11) / 9007199254740992.0 * total;
  for (int v = 0; v < vocab; ++v) {
    r -= p_[static_cast<size_t>(v)];
    if (r <= 0) return v;
  }
  return vocab - 1;
}

std::vector<int> TokenSampler::PromptTokens(const std::string& prompt) {
  std::vector<int> tokens;
  for (char ch : prompt.empty() ? std::string("\n") : prompt) tokens.push_back(static_cast<unsigned char>(ch));
  return tokens;
}

}  // namespace dslaunch::runtime
