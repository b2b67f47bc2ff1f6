// The sample at the end of a gpt run (train.sample_tokens): each next token drawn from the softmax
// of the last position's logits, by a generator seeded from the run's seed. One definition, so
// that the whole model and a pipeline's last stage draw the same tokens from the same logits.
// Pure; not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

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

}  // namespace dslaunch::runtime
