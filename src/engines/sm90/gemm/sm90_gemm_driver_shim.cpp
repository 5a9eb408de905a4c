// Driver-API entry points that CUTLASS's workspace filler (cutlass/workspace.h) calls by name.
// The library must load where no driver exists, so it never links libcuda: these definitions
// (hidden, internal to this library) resolve the real functions at first use through the CUDA
// runtime's cudaGetDriverEntryPointByVersion.
#include <cuda.h>
#include <cuda_runtime_api.h>

namespace {

template <class Fn>
Fn driver_fn(const char* name, unsigned version) {
  void* pfn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &pfn, version, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<Fn>(pfn);
}

}  // namespace

extern "C" {

__attribute__((visibility("hidden"))) CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  static auto fn = driver_fn<CUresult (*)(CUdeviceptr, unsigned char, size_t, CUstream)>("cuMemsetD8Async", 3020);
  return fn ? fn(dst, v, n, s) : CUDA_ERROR_NOT_INITIALIZED;
}

__attribute__((visibility("hidden"))) CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr dst, unsigned short v, size_t n, CUstream s) {
  static auto fn = driver_fn<CUresult (*)(CUdeviceptr, unsigned short, size_t, CUstream)>("cuMemsetD16Async", 3020);
  return fn ? fn(dst, v, n, s) : CUDA_ERROR_NOT_INITIALIZED;
}

__attribute__((visibility("hidden"))) CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream s) {
  static auto fn = driver_fn<CUresult (*)(CUdeviceptr, unsigned int, size_t, CUstream)>("cuMemsetD32Async", 3020);
  return fn ? fn(dst, v, n, s) : CUDA_ERROR_NOT_INITIALIZED;
}

__attribute__((visibility("hidden"))) CUresult CUDAAPI cuGetErrorString(CUresult error, const char** str) {
  static auto fn = driver_fn<CUresult (*)(CUresult, const char**)>("cuGetErrorString", 6000);
  if (!fn) {
    if (str) *str = "CUDA driver unavailable";
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  return fn(error, str);
}

}  // extern "C"
