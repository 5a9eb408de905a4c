// Helpers shared by the host-side launchers (dense, grouped, SwiGLU).
#pragma once

#include <cstdint>

#include "sm90_gemm.h"

namespace frost::sm90::gemm_detail {

// printf-style decline message in a thread-local buffer (valid until the next call on this thread).
const char* reason(const char* fmt, ...);
int dtype_bytes(GemmDtype t);
const char* dtype_name(GemmDtype t);
// nullptr when the current device can run sm_90a code, else why not.
const char* device_reason();
// TMA's rules for one operand: 16-byte aligned base, row stride a positive multiple of 16 bytes.
const char* check_tma_operand(const char* name, const void* ptr, int64_t stride_row, const char* row_attr, int esize);

}  // namespace frost::sm90::gemm_detail
