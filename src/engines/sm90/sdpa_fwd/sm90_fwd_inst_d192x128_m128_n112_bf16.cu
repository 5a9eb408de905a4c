// Instantiation: head dims 192 (Q, K) and 128 (V, O), tile 128 x 112, 2 stages, bf16.
#include "sm90_fwd_launch.cuh"
#include "sm90_fwd_variants.h"

namespace frost::sm90::fwd {
cudaError_t FROST_SM90_FWD_LAUNCHER_NAME(192, 128, 128, 112, 2, bf16)(SdpaFwdParams const& a, SdpaFwdConfig const& c,
    void* workspace, cudaStream_t stream) {
  return launch_sdpa_fwd<FwdTraits<192, 128, 128, 112, 2, cute::bfloat16_t>>(a, c, workspace, stream);
}
}  // namespace frost::sm90::fwd
