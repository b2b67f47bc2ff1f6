#include "runtime/data/byte_tokenizer.h"

namespace dslaunch::runtime {

std::vector<uint16_t> EncodeBytes(std::string_view text) {
  std::vector<uint16_t> tokens;
  tokens.reserve(text.size());
  for (char c : text) tokens.push_back(static_cast<unsigned char>(c));
  return tokens;
}

std::string DecodeBytes(std::span<const uint16_t> tokens) {
  std::string text;
  text.reserve(tokens.size());
  for (uint16_t t : tokens) text.push_back(t < kByteVocabSize ? static_cast<char>(t) : '?');
  return text;
}

}  // namespace dslaunch::runtime
