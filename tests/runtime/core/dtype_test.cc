// DType (runtime/core/dtype.h): the size and name of every element type, and the refusal of a type
// outside a user's subset, which names the user and the type.
#include "runtime/core/dtype.h"

#include <doctest/doctest.h>

#include <cstddef>
#include <string_view>

namespace dslaunch::runtime {
namespace {

TEST_CASE("DTypeSize and DTypeName give every element type's bytes and name") {
  struct Row {
    DType dtype;
    size_t size;
    std::string_view name;
    bool sixteen_bit;
  };
  const Row rows[] = {
      {DType::kFloat32, 4, "fp32", false}, {DType::kFloat16, 2, "fp16", true}, {DType::kBFloat16, 2, "bf16", true},
      {DType::kInt64, 8, "int64", false},  {DType::kUInt8, 1, "uint8", false},
  };
  for (const Row& row : rows) {
    CAPTURE(row.name);
    CHECK(DTypeSize(row.dtype) == row.size);
    CHECK(DTypeName(row.dtype) == row.name);
    CHECK(Is16BitFloat(row.dtype) == row.sixteen_bit);
  }
}

TEST_CASE("CheckDType accepts a type of the subset and refuses another naming the caller, the type and the subset") {
  CHECK(CheckDType("FloatTo16: output type", DType::kBFloat16, {DType::kBFloat16, DType::kFloat16}).ok());
  CHECK(CheckDType("FloatTo16: output type", DType::kFloat16, {DType::kBFloat16, DType::kFloat16}).ok());

  const Status fp32 = CheckDType("FloatTo16: output type", DType::kFloat32, {DType::kBFloat16, DType::kFloat16});
  CHECK(fp32.code() == StatusCode::kInvalidArgument);
  CHECK(fp32.message() == "FloatTo16: output type fp32 is not supported (supported: bf16, fp16)");

  const Status int64 =
      CheckDType("HasInfOrNaN: data type", DType::kInt64, {DType::kFloat32, DType::kFloat16, DType::kBFloat16});
  CHECK(int64.code() == StatusCode::kInvalidArgument);
  CHECK(int64.message() == "HasInfOrNaN: data type int64 is not supported (supported: fp32, fp16, bf16)");
}

}  // namespace
}  // namespace dslaunch::runtime
