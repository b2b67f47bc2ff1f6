#include "runtime/core/dtype.h"

#include <algorithm>
#include <string>

#include "common/check.h"

namespace dslaunch::runtime {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kInt64:
      return 8;
    case DType::kUInt8:
      return 1;
  }
  DSLAUNCH_CHECK(false) << "unknown dtype";
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "fp32";
    case DType::kFloat16:
      return "fp16";
    case DType::kBFloat16:
      return "bf16";
    case DType::kInt64:
      return "int64";
    case DType::kUInt8:
      return "uint8";
  }
  return "?";
}

bool Is16BitFloat(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16;
}

Status CheckDType(std::string_view where, DType dtype, std::initializer_list<DType> supported) {
  if (std::find(supported.begin(), supported.end(), dtype) != supported.end()) return Status::Ok();
  std::string names;
  for (DType s : supported) {
    if (!names.empty()) names += ", ";
    names += DTypeName(s);
  }
  return InvalidArgumentError(std::string(where) + " " + std::string(DTypeName(dtype)) +
                              " is not supported (supported: " + names + ")");
}

}  // namespace dslaunch::runtime
