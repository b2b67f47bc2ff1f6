// Test support for the gpu tier: device memory of `count` elements of U, freed at scope exit, with
// whole-array copies to and from host vectors. Test code: a failed CUDA call fails the case
// (REQUIRE). Host vectors may hold another type of the same size (bit copies: BFloat16 for
// __nv_bfloat16, Half for __half).
#pragma once

#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace dslaunch::testing {

template <typename U>
class DeviceArray {
 public:
  // At least one element is allocated, so that data() is a device pointer even for count 0.
  explicit DeviceArray(size_t count) : count_(count) {
    REQUIRE(cudaMalloc(reinterpret_cast<void**>(&data_), std::max<size_t>(count, 1) * sizeof(U)) == cudaSuccess);
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  U* data() const { return data_; }
  size_t count() const { return count_; }

  template <typename H = U>
  void Put(const std::vector<H>& host) {
    static_assert(sizeof(H) == sizeof(U), "host and device elements differ in size");
    REQUIRE(host.size() == count_);
    REQUIRE(cudaMemcpy(data_, host.data(), count_ * sizeof(U), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  template <typename H = U>
  std::vector<H> Get() const {
    static_assert(sizeof(H) == sizeof(U), "host and device elements differ in size");
    std::vector<H> host(count_);
    REQUIRE(cudaMemcpy(host.data(), data_, count_ * sizeof(U), cudaMemcpyDeviceToHost) == cudaSuccess);
    return host;
  }
  void Zero() { REQUIRE(cudaMemset(data_, 0, count_ * sizeof(U)) == cudaSuccess); }

 private:
  U* data_ = nullptr;
  size_t count_;
};

}  // namespace dslaunch::testing
