// CublasLtContext: the cuBLASLt handle and the workspace its matmuls may use, created once and
// passed to the launchers of the matmul ops (runtime/ops/cuda/ops.h: Linear, Attention).
//
// Ownership: the context owns both and releases them in its destructor (the device must still be
// current then). Movable, not copyable. Thread-safety: one host thread at a time. The workspace is
// scratch for each matmul on the stream it is enqueued on: two streams must not run matmuls of the
// same context concurrently (give each stream its own context).
#pragma once

#include <cublasLt.h>

#include <cstddef>

#include "common/status.h"

namespace dslaunch::runtime::ops::cuda {

// cuBLASLt picks faster kernels (split-K, stream-K) when it may use scratch memory; 32 MiB is what
// NVIDIA recommends for Hopper (cuBLAS docs, "cublasSetWorkspace"), and plenty for Ampere.
inline constexpr size_t kDefaultCublasLtWorkspaceBytes = size_t{32} << 20;

class CublasLtContext {
 public:
  // Creates the handle and allocates `workspace_bytes` of device memory on the current device.
  // kInternal naming the failing call when either fails (no device, out of memory).
  static Result<CublasLtContext> Create(size_t workspace_bytes = kDefaultCublasLtWorkspaceBytes);

  CublasLtContext(CublasLtContext&& other) noexcept;
  CublasLtContext& operator=(CublasLtContext&& other) noexcept;
  CublasLtContext(const CublasLtContext&) = delete;
  CublasLtContext& operator=(const CublasLtContext&) = delete;
  ~CublasLtContext();

  cublasLtHandle_t handle() const { return handle_; }
  void* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  CublasLtContext() = default;
  void Release();

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

}  // namespace dslaunch::runtime::ops::cuda
