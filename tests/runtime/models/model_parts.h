// What the tests of a GptModel split into parts (pipeline stages: gpt_part_test.cc; tensor ranks:
// gpt_tensor_split_test.cc) compare with the whole model: tensors by name, bits, and one small
// batch over a vocabulary of 13.
#pragma once

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "runtime/core/param_layout.h"

namespace dslaunch::runtime::testing {

// Every tensor's values by name.
inline std::map<std::string, std::vector<float>> ByName(const ParameterLayout& layout, const std::vector<float>& flat) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& g : layout.groups()) {
    for (const auto& t : g.tensors) out[t.name].assign(flat.begin() + t.offset, flat.begin() + t.offset + t.numel);
  }
  return out;
}

inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// 2 sequences of 6 tokens and their targets, ids below 13.
struct SmallBatch {
  int b = 2, t = 6;
  std::vector<int> tokens, targets;
  SmallBatch() {
    for (int i = 0; i < b * t; ++i) {
      tokens.push_back((i * 7 + 3) % 13);
      targets.push_back((i * 5 + 1) % 13);
    }
  }
};

}  // namespace dslaunch::runtime::testing
