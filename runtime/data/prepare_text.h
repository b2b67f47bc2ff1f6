// `dslaunch-worker prepare-text`: turns text files into byte-level token shards, optionally split
// into a training and a validation shard. The split is pure; PrepareText does the file I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace dslaunch::runtime {

struct TextSplit {
  std::vector<uint16_t> train;
  std::vector<uint16_t> val;
};

// Splits the concatenated tokens: the last `val_fraction` of them (cut at a token boundary) go to
// validation. Precondition: 0 <= val_fraction < 1.
TextSplit SplitTokens(std::vector<uint16_t> tokens, double val_fraction);

struct PrepareTextOptions {
  std::vector<std::string> inputs;  // text files, concatenated in this order
  std::string output;               // training shard
  std::string val_output;           // validation shard; empty: no split
  double val_fraction = 0.1;
};

// Reads the inputs, tokenizes them with the byte tokenizer and writes the shard(s). Fails naming the
// file that cannot be read or written; kInvalidArgument for no inputs or a bad fraction.
Result<TextSplit> PrepareText(const PrepareTextOptions& options);

}  // namespace dslaunch::runtime
