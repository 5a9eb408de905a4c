// Instantiation: head dim 64, 128 query rows x 128 keys, bf16, two dQ staging buffers: the kernel of
// deterministic_algorithm at this shape (sm90_bwd_variants.h).
#include "sm90_bwd_launch.cuh"
#include "sm90_bwd_variants.h"

namespace frost::sm90::bwd {
cudaError_t FROST_SM90_BWD_DET_LAUNCHER_NAME(64, 128, 128, bf16)(SdpaBwdParams const& a, void* ws,
                                                                 cudaStream_t stream) {
  return launch_sdpa_bwd<BwdTraits<64, 128, 128, cute::bfloat16_t, 2>>(a, ws, stream);
}
}  // namespace frost::sm90::bwd
