#include "engines/cudnn/cudnn_device.h"

#include <array>

#ifdef FROST_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include "runtime/device.h"

namespace frost::detail {

std::string cudnn_device_reason(const Device& device) {
  if (!device.is_cuda()) return "needs a CUDA handle; the handle is on " + device.to_string();
#ifdef FROST_WITH_CUDA
  DeviceFacts f;
  if (!query_device(device.ordinal, f)) return "cannot query " + device.to_string() + " (no usable CUDA device)";
  return {};
#else
  return "this frost was built without CUDA";
#endif
}

error_t cudnn_set_device(int ordinal) {
#ifdef FROST_WITH_CUDA
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == ordinal) return {};
  const cudaError_t e = cudaSetDevice(ordinal);
  if (e != cudaSuccess) return {error_code_t::CUDA_API_FAILED, std::string("cudaSetDevice: ") + cudaGetErrorString(e)};
  return {};
#else
  return {error_code_t::INVALID_CUDA_DEVICE, "cuda:" + std::to_string(ordinal) + ": this frost was built without CUDA"};
#endif
}

error_t cudnn_device_handle(const CudnnLibrary& lib, int ordinal, CudnnDeviceHandle*& out) {
  constexpr int kMaxDevices = 64;
  if (ordinal < 0 || ordinal >= kMaxDevices)
    return {error_code_t::INVALID_CUDA_DEVICE,
            "cuda:" + std::to_string(ordinal) + " is beyond the engine's device table"};
  // Never destroyed: cudnnDestroy at process exit can run after the CUDA runtime has shut down.
  static auto* const handles = new std::array<CudnnDeviceHandle, kMaxDevices>();
  static std::mutex create_mutex;
  std::lock_guard<std::mutex> lock(create_mutex);
  CudnnDeviceHandle& h = (*handles)[static_cast<size_t>(ordinal)];
  if (!h.handle) {
    int previous = ordinal;
#ifdef FROST_WITH_CUDA
    if (cudaGetDevice(&previous) != cudaSuccess) previous = ordinal;
#endif
    FROST_CHECK(cudnn_set_device(ordinal));
    cudnn_abi::HandlePtr created = nullptr;
    const cudnn_abi::Status s = lib.create(&created);
    FROST_CHECK(cudnn_set_device(previous));  // leave the caller's current device as it was
    if (s != cudnn_abi::kSuccess)
      return {error_code_t::CUDNN_BACKEND_API_FAILED,
              "cudnnCreate on cuda:" + std::to_string(ordinal) + ": " + lib.describe(s)};
    h.handle = created;
  }
  out = &h;
  return {};
}

}  // namespace frost::detail
