// Whether a handle's device can run sm_90a code; shared by every Hopper engine's support().
#pragma once

#include <string>

#include "frost/handle.h"

namespace frost::detail {

// Empty when `device` is a usable sm_90 GPU, else the reason (naming the device and its arch).
std::string sm90_device_reason(const Device& device);

}  // namespace frost::detail
