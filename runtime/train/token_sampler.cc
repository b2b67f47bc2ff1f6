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

Result<std::string> SampleText(const std::string& prompt, int count, uint64_t seed, int block,
                               const LastLogits& last_logits) {
  std::vector<int> context = TokenSampler::PromptTokens(prompt);
  TokenSampler sampler(seed);
  std::string out;
  std::vector<int> window;
  for (int k = 0; k < count; ++k) {
    const size_t len = std::min<size_t>(context.size(), static_cast<size_t>(block));
    window.assign(context.end() - static_cast<std::ptrdiff_t>(len), context.end());
    DSLAUNCH_ASSIGN_OR_RETURN(std::span<const float> logits, last_logits(window));
    const int next = sampler.Draw(logits);
    context.push_back(next);
    out.push_back(TokenSampler::TokenText(next));
  }
  return out;
}

}  // namespace dslaunch::runtime
