// The bundled byte-level tokenizer: token id = byte value (vocabulary of 256), so any text round-
// trips exactly and no vocabulary file is needed. Pure.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dslaunch::runtime {

inline constexpr int kByteVocabSize = 256;

std::vector<uint16_t> EncodeBytes(std::string_view text);
// Token ids >= 256 (from another tokenizer's data) decode as '?'.
std::string DecodeBytes(std::span<const uint16_t> tokens);

}  // namespace dslaunch::runtime
