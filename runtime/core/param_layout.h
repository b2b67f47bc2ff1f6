// ParameterLayout: the names, shapes and places of a model's parameters in its flat buffer,
// grouped as ParameterAccess hands them out. Pure data; the single source of truth for
// checkpoints (names, offsets) and for ZeRO partitioning (group and tensor boundaries).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dslaunch::runtime {

struct TensorInfo {
  std::string name;          // e.g. "h.3.attn.c_attn.weight"
  std::vector<int> shape;    // row-major
  size_t offset = 0;         // in the flat buffer
  size_t numel = 0;
  bool decay = true;         // weight decay applies (false for biases and layer-norm parameters)
};

struct ParameterGroup {
  std::string name;    // "embeddings", "h.3", "ln_f"
  size_t offset = 0;   // first element in the flat buffer
  size_t numel = 0;
  std::vector<TensorInfo> tensors;  // offsets are absolute
};

class ParameterLayout {
 public:
  // Starts a new group; tensors added next belong to it.
  void BeginGroup(std::string name);
  // Appends a tensor to the current group and returns its absolute offset.
  size_t Add(std::string name, std::vector<int> shape, bool decay);

  const std::vector<ParameterGroup>& groups() const { return groups_; }
  size_t numel() const { return numel_; }
  // The tensor with this name, or nullptr.
  const TensorInfo* Find(const std::string& name) const;

 private:
  std::vector<ParameterGroup> groups_;
  size_t numel_ = 0;
};

}  // namespace dslaunch::runtime
