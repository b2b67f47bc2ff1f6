// DeviceBuffer<T>: one cudaMalloc'd array of T, freed by the destructor; the device engine's
// storage. Allocate names the buffer and its size in the error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>

#include "common/status.h"

namespace dslaunch::runtime {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() {
    if (data_ != nullptr) (void)cudaFree(data_);  // a sticky error shows at the next call that syncs
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // `count` elements of device memory (uninitialised); kInternal naming `what` when cudaMalloc fails.
  static Result<DeviceBuffer> Allocate(size_t count, const std::string& what) {
    DeviceBuffer buffer;
    if (count == 0) return buffer;
    void* p = nullptr;
    const cudaError_t rc = cudaMalloc(&p, count * sizeof(T));
    if (rc != cudaSuccess) {
      return InternalError("cudaMalloc of " + what + " (" + std::to_string(count * sizeof(T)) +
                           " bytes): " + cudaGetErrorString(rc));
    }
    buffer.data_ = static_cast<T*>(p);
    buffer.size_ = count;
    return buffer;
  }

  T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace dslaunch::runtime
