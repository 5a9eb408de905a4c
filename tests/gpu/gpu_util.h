// Device buffers for GPU tests: a HostTensor mirrored on the device.
#pragma once

#include <cuda_runtime.h>

#include <string>

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

// Builds `g` for the handle's device with heuristics mode A and checks that `engine` serves it.
// Call through ASSERT_NO_FATAL_FAILURE so a failed build stops the test.
inline void build_on(graph::Graph& g, const Handle& h, const std::string& engine) {
  const error_t e = g.build(h, {HeurMode_t::A});
  ASSERT_TRUE(e.is_good()) << e.get_message();
  std::string plan;
  g.get_plan_name(plan);
  ASSERT_EQ(plan.rfind(engine, 0), 0u) << plan;
}

#define REQUIRE_SM90() \
  if (!::frost::test::have_sm90()) GTEST_SKIP() << "needs an sm_90 GPU"

}  // namespace frost::test
