#include "runtime/engine/scratch_buffers.h"

#include <algorithm>

namespace dslaunch::runtime {

std::vector<float> ScratchBuffers::Take(size_t n) {
  current_ += n * sizeof(float);
  peak_ = std::max(peak_, current_);
  const auto same = std::find_if(kept_.begin(), kept_.end(), [n](const std::vector<float>& v) { return v.size() == n; });
  if (same != kept_.end()) {
    std::vector<float> v = std::move(*same);
    kept_.erase(same);
    kept_bytes_ -= n * sizeof(float);
    std::fill(v.begin(), v.end(), 0.0f);
    return v;
  }
  // A fresh one: the kept buffers that no longer fit under the mark beside what is out go first,
  // the largest first.
  std::sort(kept_.begin(), kept_.end(),
            [](const std::vector<float>& a, const std::vector<float>& b) { return a.size() < b.size(); });
  while (!kept_.empty() && kept_bytes_ + current_ > peak_) {
    kept_bytes_ -= kept_.back().size() * sizeof(float);
    kept_.pop_back();
  }
  return std::vector<float>(n);
}

void ScratchBuffers::Give(std::vector<float>&& v) {
  current_ -= v.size() * sizeof(float);
  v = std::vector<float>();
}

void ScratchBuffers::GiveForReuse(std::vector<float>&& v) {
  const size_t bytes = v.size() * sizeof(float);
  current_ -= bytes;
  if (bytes > 0) {
    kept_bytes_ += bytes;
    kept_.push_back(std::move(v));
  }
  v = std::vector<float>();
}

void ScratchBuffers::Trim() {
  kept_.clear();
  kept_bytes_ = 0;
}

}  // namespace dslaunch::runtime
