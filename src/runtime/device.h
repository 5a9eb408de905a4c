// Device facts and the few runtime calls the host side needs. Compiles with or without CUDA.
#pragma once

#include <string>

#include "frost/error.h"
#include "frost/handle.h"

namespace frost::detail {

// Waits for the handle's stream (no-op on the host). Never called from execute().
error_t device_synchronize(const Handle& h);

struct DeviceFacts {
  std::string name;
  int sm_major = 0, sm_minor = 0, sm_count = 0;
  int64_t shared_memory_per_block_optin = 0;
  int64_t l2_bytes = 0;
};
// Facts of a CUDA device; false when there is none.
bool query_device(int ordinal, DeviceFacts& out);
// CUDA driver and runtime versions (0 when absent).
int cuda_driver_version();
int cuda_runtime_version();

}  // namespace frost::detail
