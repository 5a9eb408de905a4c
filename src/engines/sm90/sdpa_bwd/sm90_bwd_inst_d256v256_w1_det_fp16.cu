// Instantiation: d_qk 256, d_v 256, 64 query rows x 64 keys (split d), fp16, WARP_SPEC_CFG 1, ordered dQ adds
// (set_deterministic_algorithm).
#include "sm90_bwd_launch.cuh"
#include "sm90_bwd_variants.h"

namespace frost::sm90::bwd {
cudaError_t FROST_SM90_BWD_SPLITD_DET_LAUNCHER_NAME(256, 256, fp16)(SdpaBwdParams const& a, void* ws,
                                                                    cudaStream_t stream) {
  return launch_sdpa_bwd<BwdTraitsSplitD<256, 256, cute::half_t, false, true>>(a, ws, stream);
}
}  // namespace frost::sm90::bwd
