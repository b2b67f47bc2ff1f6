#include "runtime/engine/engine_options.h"

namespace dslaunch::runtime {

std::string_view PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32: return "fp32";
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
  }
  return "unknown";
}

}  // namespace dslaunch::runtime
