// Instantiated grouped (MoE) and fused-SwiGLU kernels; the launchers in
// sm90_gemm_dispatch_moe.cpp read these lists, inst/*.cu define the functions.
//
// Grouped row: X(name, a_type, b_type, d_type, b_kmajor, tile_n, tile_k, sched, cluster_n)  128 x tile_n x tile_k,
//              sched 0 cooperative, 1 ping-pong; cluster 1 x cluster_n (FP8: 128x128x128, the FP32 promotion's
//              register budget). Order is rank: with no TILE_N / TILE_CGA_N asked for, the first row that fits serves.
// SwiGLU row:  X(name, a_type, b_type, d_type, a_kmajor, b_kmajor, tile_n)  cluster 2x1; tile_n 256: 128x256x64
//              cooperative, tile_n 128: 128x128x64 ping-pong. Order is rank: with no TILE_N asked for, the first
//              row that fits serves; ping-pong ran the T8192 H4096 F14336 MLP 8 % faster (gemm NOTES.md, run 11).
#pragma once

#include "sm90_gemm_registry.h"

#define FROST_SM90_GEMM_GROUPED_LIST(X)                            \
  X(grouped_bf16_kn_bf16, BF16, BF16, BF16, 0, 256, 64, 0, 2)      \
  X(grouped_bf16_kk_bf16, BF16, BF16, BF16, 1, 256, 64, 0, 2)      \
  X(grouped_bf16_kn_bf16_p128, BF16, BF16, BF16, 0, 128, 64, 1, 2) \
  X(grouped_bf16_kk_bf16_p128, BF16, BF16, BF16, 1, 128, 64, 1, 2) \
  X(grouped_e4m3_kk_bf16, E4M3, E4M3, BF16, 1, 128, 128, 0, 2)

#define FROST_SM90_GEMM_SWIGLU_LIST(X)                     \
  X(swiglu_bf16_kn_bf16_p128, BF16, BF16, BF16, 1, 0, 128) \
  X(swiglu_bf16_kk_bf16_p128, BF16, BF16, BF16, 1, 1, 128) \
  X(swiglu_bf16_kn_bf16, BF16, BF16, BF16, 1, 0, 256)      \
  X(swiglu_bf16_kk_bf16, BF16, BF16, BF16, 1, 1, 256)

namespace frost::sm90::gemm_detail {

using GroupedRunFn = cudaError_t (*)(const GroupedGemmParams&, const GemmConfig&, void*, cudaStream_t);
using GroupedWorkspaceFn = size_t (*)(const GroupedGemmParams&, const GemmConfig&);
using SwigluRunFn = cudaError_t (*)(const SwigluParams&, const GemmConfig&, void*, cudaStream_t);
using SwigluWorkspaceFn = size_t (*)(const SwigluParams&, const GemmConfig&);

#define FROST_SM90_GEMM_DECLARE_GROUPED(NAME, ...)                      \
  size_t NAME##_workspace(const GroupedGemmParams&, const GemmConfig&); \
  cudaError_t NAME##_run(const GroupedGemmParams&, const GemmConfig&, void*, cudaStream_t);
#define FROST_SM90_GEMM_DECLARE_SWIGLU(NAME, ...)                  \
  size_t NAME##_workspace(const SwigluParams&, const GemmConfig&); \
  cudaError_t NAME##_run(const SwigluParams&, const GemmConfig&, void*, cudaStream_t);
FROST_SM90_GEMM_GROUPED_LIST(FROST_SM90_GEMM_DECLARE_GROUPED)
FROST_SM90_GEMM_SWIGLU_LIST(FROST_SM90_GEMM_DECLARE_SWIGLU)
#undef FROST_SM90_GEMM_DECLARE_GROUPED
#undef FROST_SM90_GEMM_DECLARE_SWIGLU

}  // namespace frost::sm90::gemm_detail
