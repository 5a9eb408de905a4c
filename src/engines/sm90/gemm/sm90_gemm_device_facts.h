// Device facts the launchers need at every call, cached so a launch makes no property query.
#pragma once

namespace frost::sm90::gemm_detail {

int current_device();
int sm_count(int device);

}  // namespace frost::sm90::gemm_detail
