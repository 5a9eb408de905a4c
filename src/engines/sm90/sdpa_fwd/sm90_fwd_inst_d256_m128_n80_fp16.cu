// Instantiation: head dim 256, tile 128 x 80, 2 stages, fp16.
#include "sm90_fwd_launch.cuh"
#include "sm90_fwd_variants.h"

namespace frost::sm90::fwd {
cudaError_t FROST_SM90_FWD_LAUNCHER_NAME(256, 256, 128, 80, 2, fp16)(SdpaFwdParams const& a, SdpaFwdConfig const& c,
    void* workspace, cudaStream_t stream) {
  return launch_sdpa_fwd<FwdTraits<256, 256, 128, 80, 2, cute::half_t>>(a, c, workspace, stream);
}
}  // namespace frost::sm90::fwd
