// The explicit list of instantiated GEMM kernels (one row = one CUTLASS kernel = minutes of
// compile time). Dispatch reads this table; inst/*.cu define the functions it names.
//
// Row: X(name, a_type, b_type, d_type, a_kmajor, b_kmajor, tile_m, tile_n, tile_k, cluster_m, cluster_n, sched, stream_k)
//   sched: 0 cooperative (two consumer warpgroups share a tile), 1 ping-pong (one tile per consumer,
//   epilogue of one overlapping the other's mainloop), 2 cooperative FP8 with fast (unpromoted) accumulation.
//   stream_k: 1 when the kernel runs on CUTLASS's stream-K scheduler (cooperative only), which the
//   STREAM_K and SPLIT_K knobs steer (GemmConfig).
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

#include "sm90_gemm.h"
#include "sm90_gemm_device_facts.h"

#define FROST_SM90_GEMM_DENSE_LIST(X)                                       \
  X(bf16_kn_bf16_c256, BF16, BF16, BF16, 1, 0, 128, 256, 64, 2, 1, 0, 0)    \
  X(bf16_kk_bf16_c256, BF16, BF16, BF16, 1, 1, 128, 256, 64, 2, 1, 0, 0)    \
  X(bf16_mn_bf16_c256, BF16, BF16, BF16, 0, 0, 128, 256, 64, 2, 1, 0, 0)    \
  X(bf16_mk_bf16_c256, BF16, BF16, BF16, 0, 1, 128, 256, 64, 2, 1, 0, 0)    \
  X(bf16_kn_f32_c256, BF16, BF16, FP32, 1, 0, 128, 256, 64, 2, 1, 0, 0)     \
  X(bf16_kn_bf16_p128, BF16, BF16, BF16, 1, 0, 128, 128, 64, 2, 1, 1, 0)    \
  X(fp16_kn_fp16_c256, FP16, FP16, FP16, 1, 0, 128, 256, 64, 2, 1, 0, 0)    \
  X(fp16_kk_fp16_c256, FP16, FP16, FP16, 1, 1, 128, 256, 64, 2, 1, 0, 0)    \
  X(e4m3_e4m3_bf16_c128, E4M3, E4M3, BF16, 1, 1, 128, 128, 128, 2, 1, 0, 0) \
  X(e4m3_e4m3_bf16_f256, E4M3, E4M3, BF16, 1, 1, 128, 256, 128, 2, 1, 2, 0) \
  X(e4m3_e4m3_e4m3_c128, E4M3, E4M3, E4M3, 1, 1, 128, 128, 128, 2, 1, 0, 0) \
  X(e5m2_e4m3_bf16_c128, E5M2, E4M3, BF16, 1, 1, 128, 128, 128, 2, 1, 0, 0)

// Same row format; kernels with CUTLASS's stock epilogue (D = alpha * acc; FP8: alpha * descales
// * acc), taken when the call asks for no fused epilogue work (sm90_gemm_dense_plain.cuh says why).
// Order is rank: with no tile asked for, the first row that fits serves. bf16 ping-pong 128x128 ran
// 1-5 % faster than cooperative 128x256 on 4096^3, 8192^3 and both MLP shapes (NOTES.md, run 7);
// FP8 precise 128x128 (overlapped promotion) ran 6 % faster than 128x192 (CUTLASS's promotion).
#define FROST_SM90_GEMM_PLAIN_LIST(X)                                             \
  X(bf16_kn_bf16_p128_plain, BF16, BF16, BF16, 1, 0, 128, 128, 64, 2, 1, 1, 0)    \
  X(bf16_kk_bf16_p128_plain, BF16, BF16, BF16, 1, 1, 128, 128, 64, 2, 1, 1, 0)    \
  X(bf16_kn_bf16_c256_plain, BF16, BF16, BF16, 1, 0, 128, 256, 64, 2, 1, 0, 1)    \
  X(bf16_kk_bf16_c256_plain, BF16, BF16, BF16, 1, 1, 128, 256, 64, 2, 1, 0, 1)    \
  X(e4m3_e4m3_bf16_c128_plain, E4M3, E4M3, BF16, 1, 1, 128, 128, 128, 2, 1, 0, 1) \
  X(e4m3_e4m3_bf16_c192_plain, E4M3, E4M3, BF16, 1, 1, 128, 192, 128, 2, 1, 0, 0) \
  X(e4m3_e4m3_bf16_f256_plain, E4M3, E4M3, BF16, 1, 1, 128, 256, 128, 2, 1, 2, 0)

// Same row format; kernels with the short bias + activation epilogue (sm90_gemm_bias_act.cuh), taken when the
// call asks for alpha, a 16-byte aligned bias of n a multiple of 8 and an activation, nothing else.
#define FROST_SM90_GEMM_BIAS_ACT_LIST(X)                                           \
  X(bf16_kn_bf16_p128_bias_act, BF16, BF16, BF16, 1, 0, 128, 128, 64, 2, 1, 1, 0) \
  X(bf16_kk_bf16_p128_bias_act, BF16, BF16, BF16, 1, 1, 128, 128, 64, 2, 1, 1, 0)

namespace frost::sm90::gemm_detail {

using DenseRunFn = cudaError_t (*)(const GemmParams&, const GemmConfig&, void*, cudaStream_t);
using DenseWorkspaceFn = size_t (*)(const GemmParams&, const GemmConfig&);

#define FROST_SM90_GEMM_DECLARE(NAME, ...)                                           \
  size_t NAME##_workspace(const GemmParams&, const GemmConfig&);                     \
  cudaError_t NAME##_run(const GemmParams&, const GemmConfig&, void*, cudaStream_t);
FROST_SM90_GEMM_DENSE_LIST(FROST_SM90_GEMM_DECLARE)
FROST_SM90_GEMM_PLAIN_LIST(FROST_SM90_GEMM_DECLARE)
FROST_SM90_GEMM_BIAS_ACT_LIST(FROST_SM90_GEMM_DECLARE)
#undef FROST_SM90_GEMM_DECLARE


}  // namespace frost::sm90::gemm_detail
