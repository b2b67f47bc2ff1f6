#include "runtime/data/prepare_text.h"

#include "common/file_io.h"
#include "runtime/data/byte_tokenizer.h"
#include "runtime/data/token_shard.h"

namespace dslaunch::runtime {

TextSplit SplitTokens(std::vector<uint16_t> tokens, double val_fraction) {
  size_t val = static_cast<size_t>(static_cast<double>(tokens.size()) * val_fraction);
  TextSplit split;
  split.val.assign(tokens.end() - static_cast<std::ptrdiff_t>(val), tokens.end());
  tokens.resize(tokens.size() - val);
  split.train = std::move(tokens);
  return split;
}

Result<TextSplit> PrepareText(const PrepareTextOptions& options) {
  if (options.inputs.empty()) return InvalidArgumentError("prepare-text: no input files");
  if (!(options.val_fraction >= 0 && options.val_fraction < 1)) {
    return InvalidArgumentError("prepare-text: --val_fraction must be in [0, 1)");
  }
  std::string text;
  for (const auto& path : options.inputs) {
    DSLAUNCH_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
    text += bytes;
  }
  TextSplit split = SplitTokens(EncodeBytes(text), options.val_output.empty() ? 0.0 : options.val_fraction);
  DSLAUNCH_RETURN_IF_ERROR(WriteTokenShard(options.output, split.train));
  if (!options.val_output.empty()) DSLAUNCH_RETURN_IF_ERROR(WriteTokenShard(options.val_output, split.val));
  return split;
}

}  // namespace dslaunch::runtime
