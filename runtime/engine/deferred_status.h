// DeferredStatus: the first failure of a collective made where no Status can be returned
// (ParameterAccess::Acquire and GradientReady), kept until the engine's next Step() or status().
// One instance is shared by the engine's parts, so "first" is the engine's first.
// Not thread-safe.
#pragma once

#include <utility>

#include "common/status.h"

namespace dslaunch::runtime {

class DeferredStatus {
 public:
  // Keeps `status` if it is a failure and none was kept before.
  void Record(Status status) {
    if (first_.ok() && !status.ok()) first_ = std::move(status);
  }
  const Status& status() const { return first_; }

 private:
  Status first_;
};

}  // namespace dslaunch::runtime
