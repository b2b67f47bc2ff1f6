// The CUDA ops that take their element type at run time (runtime/ops/cuda/ops.h) refuse a DType
// outside their subset with kInvalidArgument naming the op and the type. The checks come before any
// CUDA call, so these cases need no device and run on every machine that builds the gpu tier.
#include <string>

#include "runtime/ops/cuda/ops.h"
#include "tests/runtime/ops/cuda/ops_test_support.h"

namespace dslaunch::runtime::ops::cuda::testing {
namespace {

void CheckRefused(const Status& status, const std::string& message) {
  CHECK(status.code() == StatusCode::kInvalidArgument);
  CHECK(status.message() == message);
}

TEST_CASE("The CUDA ops refuse an element type they do not take, naming the op and the type") {
  float dummy = 0.0f;
  CheckRefused(FloatTo16(&dummy, DType::kInt64, &dummy, 1, nullptr),
               "FloatTo16: output type int64 is not supported (supported: bf16, fp16)");
  CheckRefused(FloatTo16(&dummy, DType::kFloat32, &dummy, 1, nullptr),
               "FloatTo16: output type fp32 is not supported (supported: bf16, fp16)");
  CheckRefused(Float16To32(&dummy, &dummy, DType::kUInt8, 1, nullptr),
               "Float16To32: input type uint8 is not supported (supported: bf16, fp16)");
  int flag = 0;
  CheckRefused(HasInfOrNaN(&dummy, 1, DType::kInt64, &flag, nullptr),
               "HasInfOrNaN: data type int64 is not supported (supported: fp32, fp16, bf16)");
  CheckRefused(AdamUpdate(AdamParams{}, &dummy, &dummy, &dummy, &dummy, 1, true, &dummy, DType::kUInt8, nullptr),
               "AdamUpdate: copy type uint8 is not supported (supported: fp32, bf16, fp16)");
}

}  // namespace
}  // namespace dslaunch::runtime::ops::cuda::testing
