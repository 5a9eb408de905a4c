// The compiled kernel variants: X(d_qk, d_v, tile_m, tile_n, stages, dtype tag, element type). Each line has one
// instantiation file sm90_fwd_inst_d<d_qk>[x<d_v>]_m<M>_n<N>_<dtype>.cu; remove a line and its file to drop a
// variant.
//   d64:  192 x 128 (three consumer warpgroups at 160 registers)
//   d128: 128 x 128 (causal default) and 128 x 176 (non-causal default)
//   d192 with d_v 128: 128 x 112 (O keeps its own buffer: 188K + 32K of shared memory)
//   d256: 128 x 80 (224 KB of shared memory)
#pragma once
#include "sm90_sdpa_fwd.h"

#define FROST_SM90_FWD_VARIANTS(X)                  \
  X(64, 64, 192, 128, 2, bf16, cute::bfloat16_t)    \
  X(64, 64, 192, 128, 2, fp16, cute::half_t)        \
  X(128, 128, 128, 128, 2, bf16, cute::bfloat16_t)  \
  X(128, 128, 128, 128, 2, fp16, cute::half_t)      \
  X(128, 128, 128, 176, 2, bf16, cute::bfloat16_t)  \
  X(128, 128, 128, 176, 2, fp16, cute::half_t)      \
  X(192, 128, 128, 112, 2, bf16, cute::bfloat16_t)  \
  X(192, 128, 128, 112, 2, fp16, cute::half_t)      \
  X(256, 256, 128, 80, 2, bf16, cute::bfloat16_t)   \
  X(256, 256, 128, 80, 2, fp16, cute::half_t)

#define FROST_SM90_FWD_LAUNCHER_NAME(D, DV, M, N, S, T) sdpa_fwd_d##D##x##DV##_m##M##_n##N##_s##S##_##T

namespace frost::sm90::fwd {
#define FROST_SM90_FWD_DECLARE(D, DV, M, N, S, T, E) \
  cudaError_t FROST_SM90_FWD_LAUNCHER_NAME(D, DV, M, N, S, T)(SdpaFwdParams const&, SdpaFwdConfig const&, void*, \
                                                          cudaStream_t);
FROST_SM90_FWD_VARIANTS(FROST_SM90_FWD_DECLARE)
#undef FROST_SM90_FWD_DECLARE
}  // namespace frost::sm90::fwd
