// InitialValues: a model's initial parameters, read a range at a time, so that whoever fills the
// engine's stores never needs the whole fp32 model in memory (DeepSpeed's zero.Init builds each
// parameter partitioned for the same reason; docs/offload.md, "Larger than memory").
//
// A call fills `out` with the flat values [begin, begin + out.size()) of the model's parameters
// (ParameterLayout order). Ranges may be read in any order and more than once; the same range
// always gives the same values. The models' own initialisations are computed per range (their
// random streams can be entered anywhere: runtime/core/random.h); values imported from a file or
// given by a test are read from memory.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <span>

#include "common/check.h"

namespace dslaunch::runtime {

using InitialValues = std::function<void(size_t begin, std::span<float> out)>;

// Reads from `values`, which must outlive the returned function.
inline InitialValues InitialValuesIn(std::span<const float> values) {
  return [values](size_t begin, std::span<float> out) {
    DSLAUNCH_CHECK(begin <= values.size() && out.size() <= values.size() - begin)
        << "initial values [" << begin << ", " << begin + out.size() << ") of " << values.size();
    std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(begin), out.size(), out.begin());
  };
}

}  // namespace dslaunch::runtime
