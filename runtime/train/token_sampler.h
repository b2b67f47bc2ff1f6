// The sample at the end of a gpt run (train.sample_tokens): each next token drawn from the softmax
// of the last position's logits, by a generator seeded from the run's seed. One definition, so
// that the whole model and a pipeline's last stage draw the same tokens from the same logits.
// Pure; not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace dslaunch::runtime {

class TokenSampler {
 public:
  explicit TokenSampler(uint64_t seed);
  // The next token from one position's logits (vocab values).
  int Draw(std::span<const float> logits);

  // The prompt's tokens (bytes; "\n" when empty), and a sampled token as text ('?' past a byte).
  static std::vector<int> PromptTokens(const std::string& prompt);
  static char TokenText(int token) { return token < 256 ? static_cast<char>(token) : '?'; }

 private:
  uint64_t state_;
  std::vector<double> p_;
};

// The logits of a window's last position (vocab values), from whichever model runs it.
using LastLogits = std::function<Result<std::span<const float>>(const std::vector<int>& window)>;

// `count` tokens after `prompt` (empty: "\n") as text, each drawn by a TokenSampler seeded with
// `seed` from the logits of the window of the last at most `block` tokens.
Result<std::string> SampleText(const std::string& prompt, int count, uint64_t seed, int block,
                               const LastLogits& last_logits);

}  // namespace dslaunch::runtime
