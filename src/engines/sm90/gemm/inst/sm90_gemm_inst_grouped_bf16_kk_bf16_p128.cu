// Grouped MoE GEMM, bf16 -> bf16, per-expert B W[n][k] (K-major). 128x128x64 ping-pong tiles: each
// consumer warpgroup owns a tile, so one tile's epilogue runs under the other's mainloop; cluster 1x2
// as in the cooperative kernel (neighbouring N tiles of one expert share the A tile).
#include "../sm90_gemm_grouped_ptr_array.cuh"

FROST_SM90_GEMM_GROUPED_INSTANCE(grouped_bf16_kk_bf16_p128, cutlass::bfloat16_t, cutlass::bfloat16_t,
                                 cutlass::layout::ColumnMajor, cutlass::bfloat16_t, Shape<_128, _128, _64>,
                                 Shape<_1, _2, _1>, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                                 cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong)
