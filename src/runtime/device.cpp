#include "runtime/device.h"

#ifdef FROST_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include "frost/handle.h"

namespace frost {

std::string Device::to_string() const { return is_cuda() ? "cuda:" + std::to_string(ordinal) : "cpu"; }

int cuda_device_count() {
#ifdef FROST_WITH_CUDA
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky "no driver" error
      return 0;
    }
    return n;
  }();
  return count;
#else
  return 0;
#endif
}

error_t create_handle(Handle& out) { return create_handle(out, cuda_device_count() > 0 ? Device::cuda(0) : Device::cpu()); }

error_t create_handle(Handle& out, Device device) {
  if (device.is_cuda() && (device.ordinal < 0 || device.ordinal >= cuda_device_count()))
    return {error_code_t::INVALID_CUDA_DEVICE, "no usable CUDA device " + device.to_string() + " (" +
                                                   std::to_string(cuda_device_count()) + " found)"};
  out = Handle(device);
  return {};
}

const char* version_string() { return FROST_VERSION; }
// frost's graph surface matches the cuDNN 9.x graph API of cuDNN Frontend 1.27-1.32's era.
int64_t backend_version() { return 91900; }
const char* backend_version_string() { return "9.19.0"; }

}  // namespace frost

namespace frost::detail {

error_t device_synchronize(const Handle& h) {
#ifdef FROST_WITH_CUDA
  if (h.device().is_cuda()) {
    cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(h.stream()));
    if (e != cudaSuccess) return {error_code_t::CUDA_API_FAILED, std::string("cudaStreamSynchronize: ") + cudaGetErrorString(e)};
  }
#else
  (void)h;
#endif
  return {};
}

bool query_device(int ordinal, DeviceFacts& out) {
#ifdef FROST_WITH_CUDA
  if (ordinal < 0 || ordinal >= cuda_device_count()) return false;
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, ordinal) != cudaSuccess) return false;
  out.name = p.name;
  out.sm_major = p.major;
  out.sm_minor = p.minor;
  out.sm_count = p.multiProcessorCount;
  out.shared_memory_per_block_optin = static_cast<int64_t>(p.sharedMemPerBlockOptin);
  out.l2_bytes = p.l2CacheSize;
  return true;
#else
  (void)ordinal;
  (void)out;
  return false;
#endif
}

int cuda_driver_version() {
#ifdef FROST_WITH_CUDA
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess) return 0;
  return v;
#else
  return 0;
#endif
}

int cuda_runtime_version() {
#ifdef FROST_WITH_CUDA
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess) return 0;
  return v;
#else
  return 0;
#endif
}

}  // namespace frost::detail
