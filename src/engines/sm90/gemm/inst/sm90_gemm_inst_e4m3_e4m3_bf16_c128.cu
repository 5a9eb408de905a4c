// e4m3 x e4m3 -> bf16; A K-major, B K-major.
// 128x128x128 tile, cluster 2x1 (the shared operand's tile multicast to both CTAs), cooperative (two consumer warpgroups split the tile's rows).
// Budget: 32 KB of shared memory per pipeline stage (stages fill what the epilogue leaves of
// 227 KB); 64 FP32 accumulators + 64 promotion temporaries per consumer thread (128x256 would need 256 registers for the two: spills).
#include "../sm90_gemm_dense_tma_ws.cuh"

FROST_SM90_GEMM_DENSE_INSTANCE(e4m3_e4m3_bf16_c128, cutlass::float_e4m3_t, cutlass::layout::RowMajor, cutlass::float_e4m3_t, cutlass::layout::ColumnMajor, cutlass::bfloat16_t,
                               Shape<_128, _128, _128>, Shape<_2, _1, _1>, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                               cutlass::epilogue::TmaWarpSpecializedCooperative)
