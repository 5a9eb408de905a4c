// Instantiation: head dim 64, tile 192 x 128, 2 stages, bf16.
#include "sm90_fwd_launch.cuh"
#include "sm90_fwd_variants.h"

namespace frost::sm90::fwd {
cudaError_t FROST_SM90_FWD_LAUNCHER_NAME(64, 64, 192, 128, 2, bf16)(SdpaFwdParams const& a, SdpaFwdConfig const& c,
    void* workspace, cudaStream_t stream) {
  return launch_sdpa_fwd<FwdTraits<64, 64, 192, 128, 2, cute::bfloat16_t>>(a, c, workspace, stream);
}
}  // namespace frost::sm90::fwd
