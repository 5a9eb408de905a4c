// Grouped MoE GEMM, e4m3 x e4m3 -> bf16 (moe_grouped_matmul in FP8), A [tokens][k] row-major, per-expert
// B W[n][k] (K-major: Hopper's FP8 wgmma reads K-major shared memory only). 128x128x128 cooperative
// tiles, cluster 1x2 like the bf16 grouped kernel (a cluster never straddles experts along M).
// FP32 promotion of every 128-deep k-tile, the adds overlapped with the next k-tile's wgmmas
// (sm90_gemm_fp8_overlap.cuh), so the accumulator stays exact to FP32: 3 x 64 FP32 registers per
// consumer thread; 128x256 would double them. 32 KB of shared memory per stage.
#include "../sm90_gemm_grouped_ptr_array.cuh"

FROST_SM90_GEMM_GROUPED_INSTANCE(grouped_e4m3_kk_bf16, cutlass::float_e4m3_t, cutlass::float_e4m3_t,
                                 cutlass::layout::ColumnMajor, cutlass::bfloat16_t, Shape<_128, _128, _128>,
                                 Shape<_1, _2, _1>, frost::sm90::gemm_detail::Fp8OverlappedPtrArrayCooperative,
                                 cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative)
