#include "runtime/ops/cuda/cuda_status.h"

#include <string>

namespace dslaunch::runtime::ops::cuda {

Status CudaStatus(cudaError_t err, std::string_view op, std::string_view what) {
  if (err == cudaSuccess) return Status::Ok();
  std::string message(op);
  message.append(": ").append(what).append(": ").append(cudaGetErrorName(err)).append(": ");
  message.append(cudaGetErrorString(err));
  return InternalError(std::move(message));
}

Status CublasStatus(cublasStatus_t status, std::string_view op, std::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  std::string message(op);
  message.append(": ").append(what).append(": ").append(cublasLtGetStatusName(status)).append(": ");
  message.append(cublasLtGetStatusString(status));
  return InternalError(std::move(message));
}

Status LaunchStatus(std::string_view op) { return CudaStatus(cudaGetLastError(), op, "launch"); }

}  // namespace dslaunch::runtime::ops::cuda
