// CUDA runtime and cuBLAS errors as dslaunch Status values, naming the op that failed:
// "LinearForward: cublasLtMatmul: CUBLAS_STATUS_NOT_SUPPORTED" or
// "GeluForward: launch: cudaErrorInvalidConfiguration: invalid configuration argument".
// A plain C++ header (g++ and nvcc). Thread-safe: pure functions.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <string_view>

#include "common/status.h"

namespace dslaunch::runtime::ops::cuda {

// OK for cudaSuccess; otherwise kInternal "<op>: <what>: <error name>: <error string>".
Status CudaStatus(cudaError_t err, std::string_view op, std::string_view what);

// OK for CUBLAS_STATUS_SUCCESS; otherwise kInternal "<op>: <what>: <status name>: <status string>".
Status CublasStatus(cublasStatus_t status, std::string_view op, std::string_view what);

// The status of the kernel launches just made on this thread (cudaGetLastError, which also
// reports a sticky error left by earlier asynchronous work and clears a non-sticky one).
Status LaunchStatus(std::string_view op);

}  // namespace dslaunch::runtime::ops::cuda
