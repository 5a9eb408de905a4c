// Grouped MoE GEMM, bf16 -> bf16, A [tokens][k] row-major; per-expert B either [k][n] (N-major)
// or W[n][k] (K-major). 128x256x64 cooperative tiles, cluster 1x2: the two CTAs of a cluster
// share one A tile (multicast) and take neighbouring N tiles of the same expert, so a cluster
// never straddles experts along M, where the token counts are ragged. 48 KB smem per stage.
#include "../sm90_gemm_grouped_ptr_array.cuh"

FROST_SM90_GEMM_GROUPED_INSTANCE(grouped_bf16_kk_bf16, cutlass::bfloat16_t, cutlass::bfloat16_t,
                                 cutlass::layout::ColumnMajor, cutlass::bfloat16_t, Shape<_128, _256, _64>,
                                 Shape<_1, _2, _1>, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
                                 cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)
