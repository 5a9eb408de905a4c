// Device buffers for GPU tests: a HostTensor mirrored on the device.
#pragma once

#include <cuda_runtime.h>

#include "test_util.h"

namespace frost::test {

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

struct DeviceTensor {
  HostTensor host;
  void* dev = nullptr;

  explicit DeviceTensor(const TensorPtr& t) : host(t) {
    if (cudaMalloc(&dev, host.bytes.size()) != cudaSuccess) dev = nullptr;
  }
  ~DeviceTensor() { cudaFree(dev); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  void upload() { cudaMemcpy(dev, host.bytes.data(), host.bytes.size(), cudaMemcpyHostToDevice); }
  void download() { cudaMemcpy(host.bytes.data(), dev, host.bytes.size(), cudaMemcpyDeviceToHost); }
};

inline bool have_sm90() {
  if (cuda_device_count() == 0) return false;
  cudaDeviceProp p{};
  return cudaGetDeviceProperties(&p, 0) == cudaSuccess && p.major == 9 && p.minor == 0;
}

#define REQUIRE_SM90() \
  if (!::frost::test::have_sm90()) GTEST_SKIP() << "needs an sm_90 GPU"

}  // namespace frost::test
