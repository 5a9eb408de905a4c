#include "engines/sm90/common/sm90_device_check.h"

#include "runtime/device.h"

namespace frost::detail {

std::string sm90_device_reason(const Device& device) {
  if (!device.is_cuda()) return "needs a CUDA handle on an sm_90 GPU; the handle is on " + device.to_string();
  DeviceFacts f;
  if (!query_device(device.ordinal, f)) return "cannot query " + device.to_string();
  if (f.sm_major != 9 || f.sm_minor != 0)
    return device.to_string() + " is sm_" + std::to_string(f.sm_major) + std::to_string(f.sm_minor) +
           "; the kernels are built for sm_90a";
  return {};
}

}  // namespace frost::detail
