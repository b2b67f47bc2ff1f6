// One cuBLASLt matmul in cuBLAS's column-major terms, for the ops of this folder (linear.cu and
// attention.cu map their row-major products onto it; the mapping is written out beside each call).
// Internal to runtime/ops/cuda/.
//
//   D[i] = alpha * op(A[i]) * op(B[i]) + beta * D[i],   i = 0 .. batch-1
//
// op(A) is m x k, op(B) is k x n, D is m x n; a matrix stored column-major with leading dimension
// ld; A[i] starts stride_a elements after A[i-1] (likewise B, D). A and B have the element type of
// `dtype`, and so has D; the accumulation and alpha, beta are fp32 (CUBLAS_COMPUTE_32F, which for
// fp32 also rules out TF32). C is D (in place), so beta = 1 accumulates.
//
// Callers build the arguments as one designated initializer, `MatmulArgs{.dtype = ..., .m = ...}`
// (C++20: the fields in declaration order; a field left out keeps its default below).
#pragma once

#include <cuda_runtime_api.h>

#include <string_view>

#include "common/status.h"
#include "runtime/ops/cuda/cublaslt_context.h"
#include "runtime/ops/cuda/ops.h"

namespace dslaunch::runtime::ops::cuda {

struct MatmulArgs {
  DType dtype = DType::kFloat32;  // kFloat32, kBFloat16 or kFloat16 (another is kInvalidArgument)
  bool trans_a = false;  // A is stored k x m and used transposed
  bool trans_b = false;  // B is stored n x k and used transposed
  int m = 0, n = 0, k = 0;
  const void* a = nullptr;
  long lda = 0, stride_a = 0;
  const void* b = nullptr;
  long ldb = 0, stride_b = 0;
  void* d = nullptr;
  long ldd = 0, stride_d = 0;
  int batch = 1;
  float alpha = 1.0f;
  float beta = 0.0f;
};

// Enqueues the matmul on `stream`, using ctx's workspace. kInternal naming `op`, the shape and the
// cuBLASLt call when a descriptor cannot be made, no algorithm fits (the heuristic is told the
// real alignment of the pointers, so this means an unsupported combination) or the launch fails.
// m, n or batch of 0 is a no-op; so is k = 0 with beta = 1 (an empty sum accumulated), while k = 0
// with another beta is kInvalidArgument (not needed by the ops). Negative sizes: kInvalidArgument.
Status Matmul(const CublasLtContext& ctx, const MatmulArgs& args, cudaStream_t stream, std::string_view op);

}  // namespace dslaunch::runtime::ops::cuda
