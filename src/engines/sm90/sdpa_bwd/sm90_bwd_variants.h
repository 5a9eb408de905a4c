// The compiled kernel variants. Each line has one instantiation file; remove a line and its file to drop a variant.
//   FROST_SM90_BWD_VARIANTS: X(head_dim, tile_m, tile_n, dtype tag, element type), file
//     sm90_bwd_inst_d<dim>_m<M>_n<N>_<dtype>.cu; 128 keys per CTA (two consumer warpgroups of 64 keys, BwdTraits);
//     d64: 128 query rows per step (64 with TILE_M 64), d128: 64 rows. The first line of a head dim is its default.
//   FROST_SM90_BWD_SPLITD_VARIANTS: X(d_qk, d_v, warp_spec, dtype tag, element type), file
//     sm90_bwd_inst_d<dqk>v<dv>_w<warp_spec>_<dtype>.cu; 64 query rows x 64 keys, the warpgroups split d
//     (BwdTraitsSplitD); warp_spec is the WARP_SPEC_CFG knob: 1 the warpgroups split the queries of S^T and dP^T,
//     2 one warpgroup computes S^T, the other dP^T. The first line of a shape is its default.
//   FROST_SM90_BWD_SPLITD_DET_VARIANTS: X(d_qk, d_v, dtype tag, element type), file
//     sm90_bwd_inst_d<dqk>v<dv>_w1_det_<dtype>.cu; the split-d kernel of WARP_SPEC_CFG 1 with ordered dQ adds, for
//     set_deterministic_algorithm (the 64-row kernels take the mode at run time).
#pragma once
#include "sm90_sdpa_bwd.h"

#define FROST_SM90_BWD_VARIANTS(X)          \
  X(64, 128, 128, bf16, cute::bfloat16_t)   \
  X(64, 128, 128, fp16, cute::half_t)       \
  X(64, 64, 128, bf16, cute::bfloat16_t)    \
  X(64, 64, 128, fp16, cute::half_t)        \
  X(128, 64, 128, bf16, cute::bfloat16_t)   \
  X(128, 64, 128, fp16, cute::half_t)

#define FROST_SM90_BWD_SPLITD_VARIANTS(X)  \
  X(256, 256, 1, bf16, cute::bfloat16_t)   \
  X(256, 256, 1, fp16, cute::half_t)       \
  X(256, 256, 2, bf16, cute::bfloat16_t)   \
  X(256, 256, 2, fp16, cute::half_t)       \
  X(192, 128, 1, bf16, cute::bfloat16_t)   \
  X(192, 128, 1, fp16, cute::half_t)

#define FROST_SM90_BWD_SPLITD_DET_VARIANTS(X) \
  X(256, 256, bf16, cute::bfloat16_t)         \
  X(256, 256, fp16, cute::half_t)             \
  X(192, 128, bf16, cute::bfloat16_t)         \
  X(192, 128, fp16, cute::half_t)

#define FROST_SM90_BWD_LAUNCHER_NAME(D, M, N, T) sdpa_bwd_d##D##_m##M##_n##N##_##T
#define FROST_SM90_BWD_SPLITD_LAUNCHER_NAME(D, DV, W, T) sdpa_bwd_d##D##v##DV##_w##W##_##T
#define FROST_SM90_BWD_SPLITD_DET_LAUNCHER_NAME(D, DV, T) sdpa_bwd_d##D##v##DV##_w1_det_##T

namespace frost::sm90::bwd {
#define FROST_SM90_BWD_DECLARE(D, M, N, T, E) \
  cudaError_t FROST_SM90_BWD_LAUNCHER_NAME(D, M, N, T)(SdpaBwdParams const&, void*, cudaStream_t);
FROST_SM90_BWD_VARIANTS(FROST_SM90_BWD_DECLARE)
#undef FROST_SM90_BWD_DECLARE
#define FROST_SM90_BWD_SPLITD_DECLARE(D, DV, W, T, E) \
  cudaError_t FROST_SM90_BWD_SPLITD_LAUNCHER_NAME(D, DV, W, T)(SdpaBwdParams const&, void*, cudaStream_t);
FROST_SM90_BWD_SPLITD_VARIANTS(FROST_SM90_BWD_SPLITD_DECLARE)
#undef FROST_SM90_BWD_SPLITD_DECLARE
#define FROST_SM90_BWD_SPLITD_DET_DECLARE(D, DV, T, E) \
  cudaError_t FROST_SM90_BWD_SPLITD_DET_LAUNCHER_NAME(D, DV, T)(SdpaBwdParams const&, void*, cudaStream_t);
FROST_SM90_BWD_SPLITD_DET_VARIANTS(FROST_SM90_BWD_SPLITD_DET_DECLARE)
#undef FROST_SM90_BWD_SPLITD_DET_DECLARE
}  // namespace frost::sm90::bwd
