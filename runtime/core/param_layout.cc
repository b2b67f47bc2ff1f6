#include "runtime/core/param_layout.h"

#include "common/check.h"

namespace dslaunch::runtime {

void ParameterLayout::BeginGroup(std::string name) {
  ParameterGroup g;
  g.name = std::move(name);
  g.offset = numel_;
  groups_.push_back(std::move(g));
}

size_t ParameterLayout::Add(std::string name, std::vector<int> shape, bool decay) {
  DSLAUNCH_CHECK(!groups_.empty()) << "ParameterLayout::Add before BeginGroup";
  size_t n = 1;
  for (int d : shape) n *= static_cast<size_t>(d);
  TensorInfo t{std::move(name), std::move(shape), numel_, n, decay};
  ParameterGroup& g = groups_.back();
  g.tensors.push_back(t);
  g.numel += n;
  numel_ += n;
  return t.offset;
}

const TensorInfo* ParameterLayout::Find(const std::string& name) const {
  for (const auto& g : groups_) {
    for (const auto& t : g.tensors) {
      if (t.name == name) return &t;
    }
  }
  return nullptr;
}

}  // namespace dslaunch::runtime
