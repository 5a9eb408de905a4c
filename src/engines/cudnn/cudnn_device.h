// The CUDA side of the cudnn engine: which handles can run it, and one cudnnHandle_t per device.
// Compiles without CUDA: then no device qualifies and every graph is declined.
#pragma once

#include <mutex>
#include <string>

#include "engines/cudnn/cudnn_library.h"
#include "frost/handle.h"

namespace frost::detail {

// Empty when `device` is a CUDA device the engine can use, else the reason.
std::string cudnn_device_reason(const Device& device);

// A cudnnHandle_t for one device with the lock that serializes its stream changes and launches.
struct CudnnDeviceHandle {
  cudnn_abi::HandlePtr handle = nullptr;
  std::mutex mutex;
};

// The handle of device `ordinal`, created on first use (cudnnCreate allocates on that device, so
// this runs at plan building, never in execute) and kept for the life of the process.
error_t cudnn_device_handle(const CudnnLibrary& lib, int ordinal, CudnnDeviceHandle*& out);

// Makes `ordinal` the calling thread's current device (no allocation, no synchronization).
error_t cudnn_set_device(int ordinal);

}  // namespace frost::detail
