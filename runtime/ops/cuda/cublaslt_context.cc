#include "runtime/ops/cuda/cublaslt_context.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "runtime/ops/cuda/cuda_status.h"

namespace dslaunch::runtime::ops::cuda {

Result<CublasLtContext> CublasLtContext::Create(size_t workspace_bytes) {
  constexpr char kOp[] = "CublasLtContext";
  CublasLtContext ctx;
  DSLAUNCH_RETURN_IF_ERROR(CublasStatus(cublasLtCreate(&ctx.handle_), kOp, "cublasLtCreate"));
  if (workspace_bytes > 0) {
    DSLAUNCH_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&ctx.workspace_, workspace_bytes), kOp, "cudaMalloc(workspace)"));
    ctx.workspace_bytes_ = workspace_bytes;
  }
  return ctx;
}

CublasLtContext::CublasLtContext(CublasLtContext&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      workspace_(std::exchange(other.workspace_, nullptr)),
      workspace_bytes_(std::exchange(other.workspace_bytes_, 0)) {}

CublasLtContext& CublasLtContext::operator=(CublasLtContext&& other) noexcept {
  if (this != &other) {
    Release();
    handle_ = std::exchange(other.handle_, nullptr);
    workspace_ = std::exchange(other.workspace_, nullptr);
    workspace_bytes_ = std::exchange(other.workspace_bytes_, 0);
  }
  return *this;
}

CublasLtContext::~CublasLtContext() { Release(); }

void CublasLtContext::Release() {
  // Errors here (a device already torn down at exit) have no one to go to; the memory and the
  // handle go with the CUDA context anyway.
  if (workspace_ != nullptr) (void)cudaFree(workspace_);
  if (handle_ != nullptr) (void)cublasLtDestroy(handle_);
  workspace_ = nullptr;
  handle_ = nullptr;
  workspace_bytes_ = 0;
}

}  // namespace dslaunch::runtime::ops::cuda
